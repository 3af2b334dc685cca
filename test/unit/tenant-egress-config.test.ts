/**
 * The EgressSelectorConfiguration in a tenant's bundle, parsed back with an independent YAML
 * parser in both YAML 1.2 and YAML 1.1 (kube-apiserver reads it with go-yaml, a 1.1 parser) and
 * checked field by field against k8s.io/apiserver's v1beta1 types and its
 * ValidateEgressSelectorConfiguration rules.
 */
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import {
  scalar,
  tcpEgressConfiguration,
  udsEgressConfiguration,
} from "../../lib/tenancy/bundle/egress-selector.js";
import { parseGatewayAddress } from "../../lib/tenancy/bundle/gateway-address.js";
import { egressProblems, parseEgress } from "../helpers/egress-config.js";

type Obj = Record<string, unknown>;

describe("the TCP+mTLS egress configuration", () => {
  it("is exactly the v1beta1 document kube-apiserver expects, in YAML 1.2 and 1.1", () => {
    const text = tcpEgressConfiguration({
      tenantId: "acme",
      url: "https://gw.example.com:8132",
      mountDir: "/etc/kgw",
    });
    const expected = {
      apiVersion: "apiserver.k8s.io/v1beta1",
      kind: "EgressSelectorConfiguration",
      egressSelections: [
        {
          name: "cluster",
          connection: {
            proxyProtocol: "HTTPConnect",
            transport: {
              tcp: {
                url: "https://gw.example.com:8132",
                tlsConfig: {
                  caBundle: "/etc/kgw/ca.crt",
                  clientKey: "/etc/kgw/client.key",
                  clientCert: "/etc/kgw/client.crt",
                },
              },
            },
          },
        },
      ],
    };
    for (const doc of parseEgress(text)) {
      expect(doc).toEqual(expected);
      expect(egressProblems(doc, false)).toEqual([]);
    }
  });

  it("keeps an IPv6 gateway address intact", () => {
    const gateway = parseGatewayAddress("[2001:db8::1]:8132");
    if ("error" in gateway) throw new Error(gateway.error);
    const text = tcpEgressConfiguration({ tenantId: "acme", url: gateway.url, mountDir: "/etc/kgw" });
    for (const doc of parseEgress(text)) {
      expect(doc).toMatchObject({
        egressSelections: [{ connection: { transport: { tcp: { url: "https://[2001:db8::1]:8132" } } } }],
      });
    }
  });

  it.each([
    "/etc/k8s #not-a-comment",
    "/etc/a: b",
    "/etc/'quoted'",
    '/etc/"double"',
    "/etc/[flow]{map},x",
    "/etc/&anchor*alias!tag%25|>",
    "/etc/\\backslash",
    "/etc/yes",
    "/etc/~",
  ])("writes the mount directory %j so that it reads back unchanged", (mountDir) => {
    const text = tcpEgressConfiguration({ tenantId: "acme", url: "https://gw:1", mountDir });
    for (const doc of parseEgress(text)) {
      expect(
        (doc as Obj & { egressSelections: { connection: { transport: { tcp: { tlsConfig: Obj } } } }[] })
          .egressSelections[0]!.connection.transport.tcp.tlsConfig.caBundle,
      ).toBe(`${mountDir}/ca.crt`);
      expect(egressProblems(doc, false)).toEqual([]);
    }
  });
});

describe("the Unix socket egress configuration", () => {
  it.each(["GRPC", "HTTPConnect"] as const)("is a valid %s over uds document", (proxyProtocol) => {
    const udsName = "/etc/kubernetes/konnectivity-server/konnectivity-server.socket";
    for (const doc of parseEgress(udsEgressConfiguration({ tenantId: "acme", udsName, proxyProtocol }))) {
      expect(doc).toEqual({
        apiVersion: "apiserver.k8s.io/v1beta1",
        kind: "EgressSelectorConfiguration",
        egressSelections: [
          { name: "cluster", connection: { proxyProtocol, transport: { uds: { udsName } } } },
        ],
      });
      expect(egressProblems(doc, false)).toEqual([]);
    }
  });
});

describe("YAML scalars", () => {
  it("round-trips every printable ASCII character", () => {
    const all = Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).join("");
    for (const value of [
      all,
      "",
      " leading",
      "trailing ",
      "null",
      "true",
      "0x1F",
      "1e3",
      "- item",
      "? key",
    ]) {
      for (const version of ["1.2", "1.1"] as const) {
        expect(parse(`key: ${scalar(value)}\n`, { version }).key).toBe(value);
      }
    }
  });

  it("refuses what it cannot vouch for in a YAML 1.1 parser", () => {
    for (const value of ["line\nbreak", "nel\u0085", "sep\u2028", "é", "\u0000"]) {
      expect(() => scalar(value)).toThrow(TypeError);
    }
  });
});

describe("the checker itself", () => {
  it("catches what kube-apiserver refuses", () => {
    const broken = {
      apiVersion: "apiserver.k8s.io/v1beta1",
      kind: "EgressSelectorConfiguration",
      egressSelections: [
        { name: "cluster", connection: { proxyProtocol: "GRPC", transport: { tcp: { url: "https://x" } } } },
        {
          name: "nodes",
          connection: { proxyProtocol: "HTTPConnect", transport: { tcp: { url: "https://x" } } },
        },
      ],
    };
    expect(egressProblems(broken, false)).toEqual(
      expect.arrayContaining([
        "GRPC needs uds",
        "egressSelections[1].name",
        "tlsConfig required with https://",
      ]),
    );
  });
});
