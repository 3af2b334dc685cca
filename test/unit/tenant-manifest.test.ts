/**
 * The agent manifest of a tenant (lib/tenancy/manifest): parsed back in YAML 1.2 and 1.1 (kubectl
 * reads 1.1), every object validated against the Kubernetes schemas with kubernetes-models, and
 * the fields that make it work checked against each other: the command line against the probes,
 * the mounts, the Secret and the ConfigMap; the token against the store; the selectors against
 * the pod labels. Then every kind of bad input, each with its typed error.
 */
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Deployment, type IDeployment } from "kubernetes-models/apps/v1/Deployment";
import {
  type IPodDisruptionBudget,
  PodDisruptionBudget,
} from "kubernetes-models/policy/v1/PodDisruptionBudget";
import { ConfigMap, type IConfigMap } from "kubernetes-models/v1/ConfigMap";
import type { IContainer } from "kubernetes-models/v1/Container";
import { Namespace } from "kubernetes-models/v1/Namespace";
import { type ISecret, Secret } from "kubernetes-models/v1/Secret";
import { type IServiceAccount, ServiceAccount } from "kubernetes-models/v1/ServiceAccount";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { parseAgentOptions } from "../../lib/config/agent-options.js";
import { GatewayError } from "../../lib/errors.js";
import { openFileTenantStore } from "../../lib/tenancy/file-store/file-tenant-store.js";
import { DEFAULT_KGW_AGENT_IMAGE, KGW_VERSION } from "../../lib/tenancy/manifest/images.js";
import {
  type AgentManifestInput,
  DEFAULT_UPSTREAM_AGENT_IMAGE,
  InvalidManifestInputError,
  type ManifestField,
  mintAgentToken,
  renderAgentManifest,
} from "../../lib/tenancy/manifest/index.js";
import { updateTenant } from "../../lib/tenancy/mutate.js";
import { createTenantRecord, deleteTenantRecord, requireActive } from "../../lib/tenancy/operations.js";
import type { TenantStore } from "../../lib/tenancy/store.js";
import { generateToken } from "../../lib/tenancy/tokens.js";
import { authenticateToken } from "../../lib/tenancy/verify.js";
import { getTestPki, type TestPki } from "../helpers/pki.js";

let dir: string;
let store: TenantStore;
let pki: TestPki;
let minted: { token: string; tokenId: string };
const now = () => new Date();

beforeAll(async () => {
  pki = await getTestPki();
  dir = await mkdtemp(path.join(tmpdir(), "kgw-manifest-"));
  store = await openFileTenantStore(path.join(dir, "store"), { create: true });
  for (const id of ["acme", "gone"]) {
    await updateTenant(store, id, (current) => createTenantRecord({ id }, current, now()));
  }
  await updateTenant(store, "gone", (current) => deleteTenantRecord(requireActive(current, "gone"), now()));
  minted = await mintAgentToken(store, "acme", now);
});

afterAll(async () => {
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

const input = (over: Partial<AgentManifestInput> = {}): AgentManifestInput => ({
  tenantId: "acme",
  gateway: { host: "gw.example.com", port: 8132 },
  caPem: pki.ca.certPem,
  agentToken: minted.token,
  ...over,
});

type Doc = Record<string, unknown> & { kind: string };

/** Parses strictly, as YAML 1.2 and as YAML 1.1; the two readings must agree. */
function parseManifest(text: string): Doc[] {
  const [v12, v11] = (["1.2", "1.1"] as const).map((version) =>
    parseAllDocuments(text, { version, strict: true, uniqueKeys: true, prettyErrors: false }).map((d) => {
      expect(d.errors).toEqual([]);
      expect(d.warnings).toEqual([]);
      return d.toJS({ maxAliasCount: 0 }) as Doc;
    }),
  );
  expect(v11).toEqual(v12);
  return v12!;
}

/**
 * The kubernetes-models class of each kind: `is` checks apiVersion and kind, `.validate()` of an
 * instance throws on any schema error. The parsed data is untyped, as an apiserver receives it.
 */
interface ModelClass {
  new (data: never): { validate(): void };
  is(value: unknown): boolean;
}
const MODELS: Record<string, ModelClass> = {
  Namespace,
  ServiceAccount,
  Secret,
  ConfigMap,
  Deployment,
  PodDisruptionBudget,
};

function validated(text: string) {
  const docs = parseManifest(text);
  for (const doc of docs) {
    const Model = MODELS[doc.kind];
    expect(Model, `a model for ${doc.kind}`).toBeDefined();
    expect(Model!.is(doc), `apiVersion and kind of ${doc.kind}`).toBe(true);
    expect(() => new Model!(doc as never).validate()).not.toThrow();
  }
  const one = <T>(kind: string) => {
    const found = docs.filter((d) => d.kind === kind);
    expect(found, kind).toHaveLength(1);
    return found[0] as unknown as T;
  };
  const deployment = one<IDeployment>("Deployment");
  return {
    docs,
    serviceAccount: one<IServiceAccount>("ServiceAccount"),
    secret: one<ISecret>("Secret"),
    configMap: one<IConfigMap>("ConfigMap"),
    deployment,
    pdb: () => one<IPodDisruptionBudget>("PodDisruptionBudget"),
    container: deployment.spec!.template.spec!.containers[0]! as IContainer,
  };
}

/** The value of `--name=` in the container's command line. */
function flag(container: IContainer, name: string): string | undefined {
  const prefix = `--${name}=`;
  return container.args?.find((a) => a.startsWith(prefix))?.slice(prefix.length);
}

describe("the agent manifest", () => {
  it("is six objects that validate against the Kubernetes schemas, in the order kubectl needs", () => {
    const m = validated(renderAgentManifest(input()));
    expect(m.docs.map((d) => d.kind)).toEqual([
      "Namespace",
      "ServiceAccount",
      "Secret",
      "ConfigMap",
      "Deployment",
      "PodDisruptionBudget",
    ]);
    for (const d of m.docs) {
      const meta = d.metadata as { namespace?: string; labels: Record<string, string> };
      if (d.kind !== "Namespace") expect(meta.namespace).toBe("kgw-system");
      expect(meta.labels).toEqual({
        "app.kubernetes.io/name": "kgw-agent",
        "app.kubernetes.io/part-of": "konnectivity-gateway",
        "konnectivity-gateway/tenant": "acme",
      });
    }
    expect(m.docs[0]!.metadata).toMatchObject({ name: "kgw-system" });
  });

  it("carries the minted token, which the store accepts as the tenant's agent token", async () => {
    const m = validated(renderAgentManifest(input()));
    expect(m.secret.type).toBe("Opaque");
    const token = Buffer.from(m.secret.data!.token!, "base64").toString("utf8");
    // Exactly the token: upstream's agent sends the file as it is, a newline included.
    expect(token).toBe(minted.token);
    const record = await store.get("acme");
    const principal = authenticateToken((id) => (id === "acme" ? record : undefined), token, "agent", now());
    expect(principal).toMatchObject({ tenantId: "acme", role: "agent", credentialId: minted.tokenId });
    expect(m.secret.metadata!.annotations).toEqual({ "konnectivity-gateway/agent-token-id": minted.tokenId });
  });

  it("carries the gateway CA exactly", () => {
    const m = validated(renderAgentManifest(input()));
    expect(m.configMap.data!["ca.crt"]).toBe(pki.ca.certPem);
    expect(readFileSync(pki.files.caCert, "utf8")).toBe(pki.ca.certPem);
    // A bundle of several certificates, as --server-ca-bundle may hold, stays whole.
    const bundle = pki.ca.certPem + pki.otherCa.certPem;
    expect(validated(renderAgentManifest(input({ caPem: bundle }))).configMap.data!["ca.crt"]).toBe(bundle);
  });

  it("runs `kgw agent` with the gateway's address, the mounted files and the pod's name", () => {
    const { container } = validated(renderAgentManifest(input()));
    expect(container.image).toBe(DEFAULT_KGW_AGENT_IMAGE);
    expect(DEFAULT_KGW_AGENT_IMAGE).toBe(`ghcr.io/konnectivity-gateway/kgw:${KGW_VERSION}`);
    expect(container.command).toEqual(["kgw", "agent"]);
    expect(container.env).toEqual([
      { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
    ]);
    // Our own parser takes the line as Kubernetes hands it over ($(POD_NAME) expanded).
    const argv = container.args!.map((a) => a.replaceAll("$(POD_NAME)", "kgw-agent-7d4b9c-x2x7q"));
    const parsed = parseAgentOptions(argv, {});
    if (parsed.help) throw new Error("unexpected help");
    expect(parsed.options).toMatchObject({
      agentId: "kgw-agent-7d4b9c-x2x7q",
      server: { host: "gw.example.com", port: 8132, serverName: "gw.example.com" },
      tls: { caCert: "/etc/kgw/ca/ca.crt", agentCert: "", agentKey: "" },
      auth: { tokenPath: "/etc/kgw/token/token", token: "" },
      health: { port: 8093 },
    });
  });

  it("mounts the Secret and the ConfigMap read-only exactly where the command line looks", () => {
    const m = validated(renderAgentManifest(input()));
    const pod = m.deployment.spec!.template.spec!;
    const fileOf = (flagName: string) => {
      const file = flag(m.container, flagName)!;
      const mount = m.container.volumeMounts!.find((v) => file.startsWith(`${v.mountPath}/`))!;
      expect(mount, `a mount holding ${file}`).toBeDefined();
      expect(mount.readOnly).toBe(true);
      const volume = pod.volumes!.find((v) => v.name === mount.name)!;
      const source = volume.secret ?? volume.configMap!;
      const item = source.items!.find((i) => path.posix.join(mount.mountPath, i.path) === file)!;
      expect(item, `an item at ${file}`).toBeDefined();
      return { volume, key: item.key };
    };
    const token = fileOf("service-account-token-path");
    expect(token.volume.secret!.secretName).toBe(m.secret.metadata!.name);
    expect(Object.keys(m.secret.data!)).toEqual([token.key]);
    // 0440 with fsGroup: the agent's group reads it, nobody else in the pod.
    expect(token.volume.secret!.defaultMode).toBe(0o440);
    const ca = fileOf("ca-cert");
    expect(ca.volume.configMap!.name).toBe(m.configMap.metadata!.name);
    expect(Object.keys(m.configMap.data!)).toEqual([ca.key]);
  });

  it("probes /healthz and /readyz on the health port the command line sets", () => {
    const { container } = validated(renderAgentManifest(input()));
    const port = Number(flag(container, "health-server-port"));
    expect(port).toBe(8093);
    expect(container.livenessProbe!.httpGet).toEqual({ path: "/healthz", port, scheme: "HTTP" });
    expect(container.readinessProbe!.httpGet).toEqual({ path: "/readyz", port, scheme: "HTTP" });
    expect(container.ports).toEqual([{ name: "health", containerPort: port, protocol: "TCP" }]);
  });

  it("runs as UID 65532 with a read-only root, no privilege escalation, no capabilities, RuntimeDefault seccomp", () => {
    const m = validated(renderAgentManifest(input()));
    const pod = m.deployment.spec!.template.spec!;
    expect(m.container.securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: 65532,
      runAsGroup: 65532,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      privileged: false,
      capabilities: { drop: ["ALL"] },
      seccompProfile: { type: "RuntimeDefault" },
    });
    expect(pod.securityContext).toMatchObject({
      runAsNonRoot: true,
      fsGroup: 65532,
      seccompProfile: { type: "RuntimeDefault" },
    });
    // No Kubernetes API token anywhere: the agent never calls the API.
    expect(m.serviceAccount.automountServiceAccountToken).toBe(false);
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(pod.serviceAccountName).toBe(m.serviceAccount.metadata!.name);
    // The "restricted" Pod Security Standard allows these volume types, and no host namespaces.
    expect(pod.volumes!.every((v) => v.secret || v.configMap)).toBe(true);
    expect([pod.hostNetwork, pod.hostPID, pod.hostIPC]).toEqual([undefined, undefined, undefined]);
    expect(m.container.resources).toEqual({
      requests: { cpu: "100m", memory: "128Mi" },
      limits: { cpu: "1", memory: "512Mi" },
    });
  });

  it("spreads two replicas over nodes and zones; the budget and the selectors match the pod labels", () => {
    const m = validated(renderAgentManifest(input()));
    const spec = m.deployment.spec!;
    const podLabels = spec.template.metadata!.labels!;
    const matches = (selector: Record<string, string> | undefined) =>
      Object.entries(selector ?? {}).every(([k, v]) => podLabels[k] === v);
    expect(spec.replicas).toBe(2);
    expect(matches(spec.selector.matchLabels)).toBe(true);
    expect(spec.selector.matchLabels).toEqual({
      "app.kubernetes.io/name": "kgw-agent",
      "konnectivity-gateway/tenant": "acme",
    });
    expect(spec.strategy).toEqual({
      type: "RollingUpdate",
      rollingUpdate: { maxUnavailable: 0, maxSurge: 1 },
    });
    const pod = spec.template.spec!;
    const [anti] = pod.affinity!.podAntiAffinity!.preferredDuringSchedulingIgnoredDuringExecution!;
    expect(anti!.podAffinityTerm.topologyKey).toBe("kubernetes.io/hostname");
    expect(matches(anti!.podAffinityTerm.labelSelector!.matchLabels)).toBe(true);
    expect(pod.affinity!.podAntiAffinity!.requiredDuringSchedulingIgnoredDuringExecution).toBeUndefined();
    const [spread] = pod.topologySpreadConstraints!;
    expect(spread).toMatchObject({ maxSkew: 1, whenUnsatisfiable: "ScheduleAnyway" });
    expect(matches(spread!.labelSelector!.matchLabels)).toBe(true);
    const pdb = m.pdb();
    expect(pdb.spec!.minAvailable).toBe(1);
    expect(pdb.spec!.selector!.matchLabels).toEqual(spec.selector.matchLabels);
  });

  it("takes another image, namespace and replica count", () => {
    const image = `registry.example.com:5000/team/kgw@sha256:${"ab".repeat(32)}`;
    const m = validated(renderAgentManifest(input({ image, namespace: "tunnels", replicas: 3 })));
    expect(m.container.image).toBe(image);
    expect(m.deployment.spec!.replicas).toBe(3);
    expect(
      m.docs.map((d) => (d.metadata as { namespace?: string; name: string }).namespace ?? d.metadata),
    ).toEqual([
      { name: "tunnels", labels: expect.any(Object) },
      "tunnels",
      "tunnels",
      "tunnels",
      "tunnels",
      "tunnels",
    ]);
  });

  it("leaves out the budget for one replica: minAvailable 1 would block every node drain", () => {
    const m = validated(renderAgentManifest(input({ replicas: 1 })));
    expect(m.docs.map((d) => d.kind)).not.toContain("PodDisruptionBudget");
    expect(m.deployment.spec!.replicas).toBe(1);
  });

  it("writes an IPv6 gateway as the agent takes it", () => {
    const { container } = validated(
      renderAgentManifest(input({ gateway: { host: "2001:db8::1", port: 443 } })),
    );
    expect(flag(container, "proxy-server-host")).toBe("2001:db8::1");
    expect(flag(container, "proxy-server-port")).toBe("443");
  });

  it("runs upstream's proxy-agent with the same objects and flags when asked", () => {
    const ours = validated(renderAgentManifest(input()));
    const upstream = validated(renderAgentManifest(input({ flavor: "upstream" })));
    expect(upstream.container.image).toBe(DEFAULT_UPSTREAM_AGENT_IMAGE);
    expect(DEFAULT_UPSTREAM_AGENT_IMAGE).toBe("registry.k8s.io/kas-network-proxy/proxy-agent:v0.36.0");
    expect(upstream.container.command).toEqual(["/proxy-agent"]);
    expect(upstream.container.args).toEqual(ours.container.args);
    const strip = (docs: Doc[]) =>
      JSON.stringify(docs)
        .replaceAll(DEFAULT_UPSTREAM_AGENT_IMAGE, "IMAGE")
        .replaceAll(DEFAULT_KGW_AGENT_IMAGE, "IMAGE");
    const commandless = (docs: Doc[]) =>
      JSON.parse(strip(docs).replace(/"command":\[[^\]]*\]/, '"command":[]'));
    expect(commandless(upstream.docs)).toEqual(commandless(ours.docs));
  });

  it("would fail the schema check with a field of the wrong type (the check has teeth)", () => {
    const [deployment] = parseManifest(renderAgentManifest(input())).filter((d) => d.kind === "Deployment");
    const broken = JSON.parse(JSON.stringify(deployment).replace('"runAsUser":65532', '"runAsUser":"65532"'));
    expect(() => new Deployment(broken).validate()).toThrow(/runAsUser must be integer/);
  });

  it("tags our image with the package's version", () => {
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
      version: string;
    };
    expect(KGW_VERSION).toBe(pkg.version);
  });
});

describe("bad input gets a typed error naming the field", () => {
  const refused = (over: Partial<AgentManifestInput>, field: ManifestField, words: RegExp) => {
    let caught: unknown;
    try {
      renderAgentManifest(input(over));
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(InvalidManifestInputError);
    const e = caught as InvalidManifestInputError;
    expect([e.code, e.field]).toEqual(["ERR_BAD_REQUEST", field]);
    expect(e.message).toMatch(words);
    // Whatever is wrong, the token never appears in an error.
    expect(e.message).not.toContain(minted.token.slice(-64));
  };

  it.each([
    ["nginx", /tag or a digest/],
    ["ghcr.io/Konnectivity/kgw:1", /not an image reference/],
    ["ghcr.io/kgw:1 --privileged", /not an image reference/],
    ["ghcr.io/kgw:", /not an image reference/],
    ["ghcr.io/kgw@sha256:abc", /not an image reference/],
    ["", /not an image reference/],
    [`ghcr.io/${"a".repeat(260)}:1`, /longer than 255/],
  ])("image %j", (image, words) => refused({ image }, "image", words));

  it.each(["Kube_System", "-system", "system-", "a.b", "", "a".repeat(64), "système"])(
    "namespace %j",
    (namespace) => refused({ namespace }, "namespace", /not a namespace name/),
  );

  it.each(["Acme", "default", "../acme", ""])("tenant id %j", (tenantId) =>
    refused({ tenantId }, "tenantId", /tenant id/),
  );

  it.each([0, 11, 1.5, Number.NaN])("replicas %j", (replicas) =>
    refused({ replicas }, "replicas", /from 1 to 10/),
  );

  it("a token of another tenant, a caller token and something that is no token", () => {
    refused(
      { agentToken: generateToken("agent", "globex").token },
      "agentToken",
      /not an agent token of tenant acme/,
    );
    refused({ agentToken: generateToken("caller", "acme").token }, "agentToken", /not an agent token/);
    refused({ agentToken: `${minted.token}\n` }, "agentToken", /not an agent token/);
    refused({ agentToken: "hunter2" }, "agentToken", /not an agent token/);
  });

  it("a CA that is no certificate, holds a private key, or is too large", () => {
    refused({ caPem: "" }, "caPem", /no PEM certificate/);
    refused({ caPem: pki.ca.certPem + pki.ca.keyPem }, "caPem", /other than certificates/);
    refused(
      { caPem: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n" },
      "caPem",
      /does not parse/,
    );
    refused(
      { caPem: pki.ca.certPem + pki.server.certPem.replace(/\n-----END.*\n/, "\n") },
      "caPem",
      /END line/,
    );
    refused(
      { caPem: pki.ca.certPem.replace("MII", "MIJ") + pki.server.certPem },
      "caPem",
      /1 of 2 does not parse/,
    );
    refused({ caPem: pki.ca.certPem.repeat(1000) }, "caPem", /larger than 256 KiB/);
    refused({ caPem: `${pki.ca.certPem}é` }, "caPem", /not PEM text/);
  });

  it.each([
    [{ host: "gw example", port: 8132 }, /not a DNS name/],
    [{ host: "gw.example.com", port: 0 }, /outside 1-65535/],
    [{ host: "gw.example.com", port: 70000 }, /outside 1-65535|expected host:port/],
    [{ host: "gw.example.com", port: 81.5 }, /not an integer/],
    [{ host: "", port: 8132 }, /expected host:port/],
  ])("gateway %j", (gateway, words) => refused({ gateway }, "gateway", words));

  it("an unknown flavor", () => {
    refused({ flavor: "helm" as never }, "flavor", /not one of kgw, upstream/);
  });
});

describe("minting the manifest's token", () => {
  it("adds an agent token and leaves the tenant's other agent tokens valid", async () => {
    const second = await mintAgentToken(store, "acme", now);
    const record = await store.get("acme");
    for (const token of [minted.token, second.token]) {
      expect(authenticateToken(() => record, token, "agent", now()).tenantId).toBe("acme");
    }
    expect(second.record.agentTokens.map((t) => t.id)).toContain(minted.tokenId);
  });

  it.each([
    ["an unknown tenant", "nobody", "ERR_NOT_FOUND"],
    ["a deleted tenant", "gone", "ERR_NOT_FOUND"],
    ["a bad tenant id", "../acme", "ERR_BAD_REQUEST"],
  ])("refuses %s before anything is written", async (_what, id, code) => {
    const before = await store.get(id === "../acme" ? "acme" : id);
    const err = await mintAgentToken(store, id, now).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GatewayError);
    expect((err as GatewayError).code).toBe(code);
    expect(await store.get(id === "../acme" ? "acme" : id)).toEqual(before);
  });
});
