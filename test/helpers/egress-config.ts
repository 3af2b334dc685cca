/**
 * Reading an EgressSelectorConfiguration as kube-apiserver would: an independent YAML parser in
 * YAML 1.2 and 1.1 (kube-apiserver's go-yaml reads 1.1), and a checker of k8s.io/apiserver's
 * v1beta1 types and ValidateEgressSelectorConfiguration rules.
 */
import fs from "node:fs";
import { parse } from "yaml";

/** Parses strictly: duplicate keys, aliases and custom tags would all be surprises here. */
export function parseEgress(text: string): unknown[] {
  return (["1.2", "1.1"] as const).map((version) =>
    parse(text, { version, strict: true, uniqueKeys: true, prettyErrors: false, maxAliasCount: 0 }),
  );
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * kube-apiserver's rules (egressselector/config.go, v1beta1 types), written as a checker that
 * also refuses any field the v1beta1 types do not have (a strict decoder would).
 */
export function egressProblems(doc: unknown, checkFilesExist: boolean): string[] {
  const problems: string[] = [];
  const only = (o: Obj, where: string, keys: string[]) => {
    for (const k of Object.keys(o)) if (!keys.includes(k)) problems.push(`${where}: unknown field ${k}`);
  };
  if (!isObj(doc)) return ["not a mapping"];
  only(doc, "root", ["apiVersion", "kind", "egressSelections"]);
  if (doc.apiVersion !== "apiserver.k8s.io/v1beta1") problems.push("apiVersion");
  if (doc.kind !== "EgressSelectorConfiguration") problems.push("kind");
  const selections = doc.egressSelections;
  if (!Array.isArray(selections)) return [...problems, "egressSelections is not a list"];
  const seen = new Set<string>();
  for (const [i, s] of selections.entries()) {
    const where = `egressSelections[${i}]`;
    if (!isObj(s)) {
      problems.push(`${where}: not a mapping`);
      continue;
    }
    only(s, where, ["name", "connection"]);
    const name = String(s.name).toLowerCase();
    if (!["controlplane", "cluster", "etcd"].includes(name)) problems.push(`${where}.name`);
    if (seen.has(name)) problems.push(`${where}: duplicate`);
    seen.add(name);
    const c = s.connection;
    if (!isObj(c)) {
      problems.push(`${where}.connection`);
      continue;
    }
    only(c, `${where}.connection`, ["proxyProtocol", "transport"]);
    const t = c.transport;
    if (c.proxyProtocol === "Direct") {
      if (t !== undefined) problems.push("Direct with a transport");
      continue;
    }
    if (c.proxyProtocol !== "HTTPConnect" && c.proxyProtocol !== "GRPC") {
      problems.push(`proxyProtocol ${String(c.proxyProtocol)}`);
      continue;
    }
    if (!isObj(t)) {
      problems.push("transport required");
      continue;
    }
    only(t, "transport", ["tcp", "uds"]);
    if ((t.tcp === undefined) === (t.uds === undefined)) problems.push("exactly one of tcp and uds");
    if (c.proxyProtocol === "GRPC" && t.uds === undefined) problems.push("GRPC needs uds");
    if (isObj(t.uds)) {
      only(t.uds, "uds", ["udsName"]);
      if (typeof t.uds.udsName !== "string" || t.uds.udsName === "") problems.push("udsName");
    }
    if (isObj(t.tcp)) {
      only(t.tcp, "tcp", ["url", "tlsConfig"]);
      const url = String(t.tcp.url);
      const tls = t.tcp.tlsConfig;
      if (url.startsWith("http://")) {
        if (tls !== undefined) problems.push("tlsConfig with http://");
      } else if (url.startsWith("https://")) {
        if (!isObj(tls)) {
          problems.push("tlsConfig required with https://");
          continue;
        }
        only(tls, "tlsConfig", ["caBundle", "clientKey", "clientCert"]);
        for (const key of ["clientCert", "clientKey"]) {
          if (typeof tls[key] !== "string" || tls[key] === "") problems.push(`${key} required`);
        }
        if (checkFilesExist) {
          for (const key of ["caBundle", "clientCert", "clientKey"]) {
            if (typeof tls[key] === "string" && tls[key] !== "" && !fs.existsSync(tls[key] as string)) {
              problems.push(`${key} does not exist`);
            }
          }
        }
      } else {
        problems.push("url must be http:// or https://");
      }
    }
  }
  return problems;
}
