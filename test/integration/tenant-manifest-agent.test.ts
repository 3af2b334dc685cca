/**
 * The agent manifest, run: a tenant-mode gateway, `kgw tenant manifest` for one of its tenants,
 * and our agent started in a child process exactly as the Deployment's container says (its
 * command and args, its environment, the Secret and the ConfigMap as files where the volumes
 * would be). The agent must connect as the tenant, pass its own probes, and carry the tenant
 * caller's bytes to a backend and back.
 *
 * What differs from a pod, and why: the mount paths are under a temporary directory (no root
 * needed), $(POD_NAME) is expanded here as the kubelet would, and the health port (8093 in the
 * manifest) and the admin port (8094 by default) become free ports: a pod has a network
 * namespace of its own, this test shares the host's. The child runs the CLI from source (tsx):
 * bin/kgw.js runs dist/, which a test must not depend on being freshly built.
 */
import { randomBytes } from "node:crypto";
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { get as httpGet } from "node:http";
import { type AddressInfo, createServer as createNetServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import type { IDeployment } from "kubernetes-models/apps/v1/Deployment";
import type { IConfigMap } from "kubernetes-models/v1/ConfigMap";
import type { IContainer } from "kubernetes-models/v1/Container";
import type { ISecret } from "kubernetes-models/v1/Secret";
import type { IVolume } from "kubernetes-models/v1/Volume";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { waitFor } from "../helpers/agent.js";
import { startTenantGateway, type TestGateway } from "../helpers/gateway.js";
import { connectOnGatewayPort } from "../helpers/gateway-connect.js";
import { type KgwProcess, spawnKgw } from "../helpers/kgw-process.js";
import { getTestPki, type TestPki } from "../helpers/pki.js";
import { expectNoLeakedResources, activeResources as resources } from "../helpers/resources.js";
import { type CreatedTenant, makeTenantStore, type TestTenantStore } from "../helpers/tenants.js";

/** A name as a ReplicaSet gives its pods. */
const POD_NAME = "kgw-agent-6f7d9c8b5-q2x7z";

let pki: TestPki;
let store: TestTenantStore;
let tenant: CreatedTenant;
let t: TestGateway;
let echo: { address: string; close(): Promise<void> };
let podRoot: string;
let agent: KgwProcess | undefined;
let baseline: Map<string, number>;
const sockets: Socket[] = [];

/** Handles and requests alive in this process, by kind, for the leak check. */
async function startEchoBackend(): Promise<{ address: string; close(): Promise<void> }> {
  const open = new Set<Socket>();
  const server: Server = createNetServer((s) => {
    open.add(s);
    s.on("close", () => open.delete(s));
    s.on("error", () => {});
    s.pipe(s);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    address: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise((r) => {
        for (const s of open) s.destroy();
        server.close(() => r());
      }),
  };
}

async function freePort(): Promise<number> {
  const server = createNetServer();
  await new Promise<void>((r) => server.listen(0, r));
  const { port } = server.address() as AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

/** Status of GET http://127.0.0.1:port/path, or 0 if nothing answers. */
function probe(port: number, urlPath: string): Promise<number> {
  return new Promise((resolve) => {
    const req = httpGet({ host: "127.0.0.1", port, path: urlPath, agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("error", () => resolve(0));
  });
}

/** Kubernetes' expansion of command and args: $(VAR) from the container's env, $$ for a literal $. */
function expand(arg: string, env: Record<string, string>): string {
  return arg.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, name: string | undefined) =>
    m === "$$" ? "$" : name !== undefined && Object.hasOwn(env, name) ? env[name]! : m,
  );
}

/** The container's env as the kubelet fills it: values, and the downward API's fields of this pod. */
function containerEnv(container: IContainer, namespace: string): Record<string, string> {
  const fields: Record<string, string> = { "metadata.name": POD_NAME, "metadata.namespace": namespace };
  const env: Record<string, string> = {};
  for (const e of container.env ?? []) {
    const field = e.valueFrom?.fieldRef?.fieldPath;
    if (e.value !== undefined) env[e.name] = e.value;
    else if (field !== undefined && Object.hasOwn(fields, field)) env[e.name] = fields[field]!;
    else throw new Error(`env ${e.name}: not something this test can fill in`);
  }
  return env;
}

/**
 * Writes each mounted volume's items where the kubelet would put them, under `root`, with the
 * volume's mode; returns the pod path → host path of each mount.
 */
async function mountVolumes(
  container: IContainer,
  volumes: IVolume[],
  objects: { secrets: ISecret[]; configMaps: IConfigMap[] },
  root: string,
): Promise<Map<string, string>> {
  const mounts = new Map<string, string>();
  for (const mount of container.volumeMounts ?? []) {
    expect(mount.readOnly, `${mount.name} is mounted read-only`).toBe(true);
    const volume = volumes.find((v) => v.name === mount.name)!;
    const hostDir = path.join(root, mount.mountPath);
    await mkdir(hostDir, { recursive: true });
    let files: { name: string; content: Buffer }[];
    let mode: number;
    if (volume.secret) {
      const secret = objects.secrets.find((s) => s.metadata!.name === volume.secret!.secretName)!;
      files = volume.secret.items!.map((i) => ({
        name: i.path,
        content: Buffer.from(secret.data![i.key]!, "base64"),
      }));
      mode = volume.secret.defaultMode!;
    } else {
      const configMap = objects.configMaps.find((c) => c.metadata!.name === volume.configMap!.name)!;
      files = volume.configMap!.items!.map((i) => ({
        name: i.path,
        content: Buffer.from(configMap.data![i.key]!),
      }));
      mode = volume.configMap!.defaultMode!;
    }
    for (const f of files) {
      const file = path.join(hostDir, f.name);
      await writeFile(file, f.content);
      await chmod(file, mode);
    }
    mounts.set(mount.mountPath, hostDir);
  }
  return mounts;
}

/** CONNECT on the gateway's port 8132 (here: port 0) with the tenant's caller token. */
async function connectAsCaller(target: string): Promise<{ status: number; socket: Socket }> {
  const r = await connectOnGatewayPort(pki, t.gw.addresses.agent.port, { token: tenant.callerToken }, target);
  sockets.push(r.socket);
  return r;
}

/** Writes `data` and reads back as many bytes. */
function echoThrough(socket: Socket, data: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let got = 0;
    socket.on("data", (c: Buffer) => {
      chunks.push(c);
      got += c.length;
      if (got >= data.length) resolve(Buffer.concat(chunks));
    });
    socket.once("error", reject);
    socket.once("close", () => reject(new Error(`closed after ${got} of ${data.length} bytes`)));
    socket.write(data);
  });
}

beforeAll(async () => {
  pki = await getTestPki();
  baseline = resources();
  store = makeTenantStore(pki);
  tenant = await store.create("acme");
  await store.create("globex");
  t = await startTenantGateway(store.dir);
  echo = await startEchoBackend();
  podRoot = await mkdtemp(path.join(tmpdir(), "kgw-pod-"));
});

afterAll(async () => {
  for (const s of sockets) s.destroy();
  if (agent && agent.child.exitCode === null && agent.child.signalCode === null) {
    agent.child.kill("SIGKILL");
    await agent.exited;
  }
  await t?.gw.close();
  await echo?.close();
  store?.remove();
  if (podRoot) await rm(podRoot, { recursive: true, force: true });
  // Everything this file opened must be gone: sockets, servers, timers, the child process.
  await expectNoLeakedResources(baseline);
});

describe("an agent started as the manifest's Deployment says", () => {
  let healthPort: number;
  let container: IContainer;

  it("connects to the gateway as the tenant, under the pod's name, and passes its probes", async () => {
    const port = t.gw.addresses.agent.port;
    // The gateway's serving certificate names localhost: the address a tenant would be given.
    const out = (await store.run(["manifest", "acme", `--gateway-address=localhost:${port}`])) as {
      manifest: string;
      agentTokenId: string;
    };
    const docs = parseAllDocuments(out.manifest).map((d) => d.toJS() as { kind: string });
    const of = <T>(kind: string) => docs.filter((d) => d.kind === kind) as T[];
    const [deployment] = of<IDeployment>("Deployment");
    const pod = deployment!.spec!.template.spec!;
    expect(pod.containers).toHaveLength(1);
    container = pod.containers[0]!;
    const namespace = deployment!.metadata!.namespace!;

    const mounts = await mountVolumes(
      container,
      pod.volumes!,
      { secrets: of<ISecret>("Secret"), configMaps: of<IConfigMap>("ConfigMap") },
      podRoot,
    );
    const env = containerEnv(container, namespace);
    healthPort = await freePort();
    const probePort = container.readinessProbe!.httpGet!.port;
    const argv = [...container.command!, ...container.args!].map((arg) => {
      let a = expand(arg, env);
      for (const [podPath, hostPath] of mounts) a = a.replaceAll(`${podPath}/`, `${hostPath}/`);
      return a === `--health-server-port=${probePort}` ? `--health-server-port=${healthPort}` : a;
    });
    // Every file the command line names was rewritten to a mounted one, and the port to ours.
    expect(argv.join(" ")).not.toMatch(/=\/etc\/|\$\(|=8093\b/);
    expect(argv.slice(0, 2)).toEqual(["kgw", "agent"]);

    agent = spawnKgw([...argv.slice(1), "--admin-server-port=0"]);
    await waitFor(
      () => t.gw.registry.agents("acme").some((a) => a.info.agentId === POD_NAME),
      15_000,
      "the agent registered as acme's",
    ).catch((err: Error) => {
      throw new Error(`${err.message}; agent output:\n${agent!.output.join("")}`);
    });
    expect(t.gw.registry.agents("globex")).toEqual([]);
    // Authenticated with the manifest's token, the one minted for it.
    const registered = t.gw.registry.agents("acme").find((a) => a.info.agentId === POD_NAME)!;
    expect(registered.info.identity).toBe(`token:${out.agentTokenId}`);

    // The probes exactly as the kubelet would run them, on the port they name (rewritten).
    const readiness = container.readinessProbe!.httpGet!;
    const liveness = container.livenessProbe!.httpGet!;
    await waitFor(async () => (await probe(healthPort, readiness.path!)) === 200, 10_000, "readiness probe");
    expect(await probe(healthPort, liveness.path!)).toBe(200);
  });

  it("carries the tenant's caller's bytes to a backend and back", async () => {
    const { status, socket } = await connectAsCaller(echo.address);
    expect(status).toBe(200);
    const data = randomBytes(256 * 1024);
    const back = await echoThrough(socket, data);
    expect(back.equals(data)).toBe(true);
    socket.destroy();
  });

  it("stops on SIGTERM, as the kubelet stops it, and leaves the gateway without it", async () => {
    agent!.child.kill("SIGTERM");
    const exit = await agent!.exited;
    expect(exit, agent!.output.join("")).toEqual({ code: 0, signal: null });
    await waitFor(() => t.gw.registry.agents("acme").length === 0, 5000, "the agent deregistered");
    // Readiness answered by nothing now: the port is closed.
    expect(await probe(healthPort, container.readinessProbe!.httpGet!.path!)).toBe(0);
  });
});
