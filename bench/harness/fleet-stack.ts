/**
 * A local fleet for the benchmark, set up as an operator sets one up: a DynamoDB (dynalite, a
 * process of its own), the tenant made with `kgw tenant --table`, N `kgw server --registry-table`
 * instances with peer ports and peer certificates from the run's CA, and our agent of the tenant
 * connected to one chosen instance. Everything else (binaries, TLS, log level, quotas far above
 * what is asked) is as in the tenant-mode stack, so that the single instance and the peer hop
 * differ only by the hop.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import path from "node:path";
import { issuePeerCertificate } from "../../lib/fleet/peer/peer-certificate-issue.js";
import { loadCa } from "../../lib/pki/ca.js";
import { writePemFiles } from "../../lib/pki/files.js";
import { localAwsEnv } from "./local-aws.js";
import type { BenchPki } from "./pki.js";
import { freePort, LOOPBACK } from "./ports.js";
import { Child } from "./procs.js";
import { REPO_ROOT } from "./repo.js";
import {
  httpStatus,
  KGW_BIN,
  NODE,
  nodeFlags,
  type StackContext,
  startKgwAgent,
  type TunnelStack,
} from "./stacks.js";
import { waitUntil, withTimeout } from "./util.js";
import { KGW_LOG_FLAGS } from "./verbosity.js";

const TABLE = "kgw-bench";
const TENANT = "bench";
const START_MS = 30_000;
const CLI_MS = 30_000;
const DYNALITE_MAIN = path.join(REPO_ROOT, "bench", "harness", "dynalite-main.ts");

export interface BenchFleet {
  /** The instances, each as a TunnelStack (callers dial its agent port, in tenant mode). */
  instances: TunnelStack[];
  /** The tenant's callers: the bundle's CA and caller certificate. */
  callers: BenchPki;
  agent: Child;
}

export async function startDynalite(ctx: StackContext): Promise<number> {
  const child = new Child("dynalite", ctx.output.fileFor("dynalite"), NODE, [
    "--import",
    "tsx",
    DYNALITE_MAIN,
    `--table=${TABLE}`,
  ]);
  ctx.scope.defer(() => child.stop());
  const line = await child.waitForLine((l) => l.startsWith('{"port"'), START_MS);
  return (JSON.parse(line) as { port: number }).port;
}

/** `kgw tenant create` on the table; returns the agent token and the caller bundle's files. */
export async function createTenant(ctx: StackContext, env: Record<string, string>, gatewayPort: number) {
  const dir = mkdtempSync(path.join(ctx.pki.dir, "fleet-tenant-"));
  const json = path.join(dir, "create.json");
  const child = new Child(
    "kgw-tenant-create",
    ctx.output.fileFor("kgw-tenant-create"),
    NODE,
    [
      KGW_BIN,
      "tenant",
      "create",
      TENANT,
      `--table=${TABLE}`,
      "--allow-loopback",
      "--output=json",
      `--out=${path.join(dir, "bundle")}`,
    ],
    {
      ...env,
      KGW_CA_CERT: ctx.pki.files.caCert,
      KGW_CA_KEY: ctx.pki.files.caKey,
      KGW_GATEWAY_ADDRESS: `${LOOPBACK}:${gatewayPort}`,
    },
    json,
  );
  const { code } = await withTimeout(child.exited, CLI_MS, "kgw tenant create");
  if (code !== 0) throw new Error(`kgw tenant create exited ${code}\n${child.tail()}`);
  return JSON.parse(readFileSync(json, "utf8")) as {
    agentToken: string;
    bundle: { files: { caBundle: string; clientCert: string; clientKey: string } };
  };
}

/** The ports of one fleet instance. */
export interface InstancePorts {
  agent: number;
  admin: number;
  health: number;
  peer: number;
}

export async function instancePorts(): Promise<InstancePorts> {
  return {
    agent: await freePort(),
    admin: await freePort(),
    health: await freePort(),
    peer: await freePort(),
  };
}

/** A peer certificate from the run's CA, as files: every instance of a fleet presents it. */
export async function writePeerFiles(ctx: StackContext): Promise<PeerFiles> {
  const peer = await issuePeerCertificate(
    loadCa({ certPem: ctx.pki.caPem, keyPem: readFileSync(ctx.pki.files.caKey, "utf8") }),
  );
  return writePemFiles(mkdtempSync(path.join(ctx.pki.dir, "peer-")), {
    "peer.pem": peer.certPem,
    "peer-key.pem": peer.keyPem,
  });
}

export type PeerFiles = Record<"peer.pem" | "peer-key.pem", string>;

/**
 * One `kgw server --registry-table` instance of the fleet on the DynamoDB that `env` reaches (as
 * hosted: tenant mode, peer port), resolved once it is ready in the fleet (listening and holding
 * its lease, agents or not). `ctx.onServerSpawn` is told of its spawn, as for the other servers.
 */
export async function startFleetInstance(
  ctx: StackContext,
  env: Record<string, string>,
  peerFiles: PeerFiles,
  p: InstancePorts,
  label: string,
  /** More flags for the server (the dial-steps scenario's audit log and step metrics). */
  extraArgs: (label: string) => string[] = () => [],
): Promise<TunnelStack> {
  const f = ctx.pki.files;
  const server = new Child(
    `${label}-server`,
    ctx.output.fileFor(`${label}-server`),
    NODE,
    [
      ...nodeFlags(ctx, `${label}-server`),
      KGW_BIN,
      "server",
      `--server-id=bench-${label}`,
      `--registry-table=${TABLE}`,
      `--tenant-ca-cert=${f.caCert}`,
      "--tenant-max-tunnels=1000000",
      "--tenant-dial-rate=100000",
      "--tenant-dial-burst=1000000",
      `--agent-port=${p.agent}`,
      `--agent-bind-address=${LOOPBACK}`,
      `--cluster-cert=${f.serverCert}`,
      `--cluster-key=${f.serverKey}`,
      `--peer-port=${p.peer}`,
      `--peer-bind-address=${LOOPBACK}`,
      `--peer-advertise-address=${LOOPBACK}:${p.peer}`,
      `--peer-cert=${peerFiles["peer.pem"]}`,
      `--peer-key=${peerFiles["peer-key.pem"]}`,
      `--peer-ca-cert=${f.caCert}`,
      // One stream per agent: the agent stays on the instance it was pointed at, so every dial
      // entering elsewhere crosses exactly one peer hop.
      "--agent-redundancy=1",
      `--admin-port=${p.admin}`,
      `--admin-bind-address=${LOOPBACK}`,
      `--health-port=${p.health}`,
      `--health-bind-address=${LOOPBACK}`,
      "--graceful-shutdown-timeout=1s",
      ...KGW_LOG_FLAGS,
      ...extraArgs(label),
    ],
    env,
  );
  ctx.onServerSpawn?.(server, p.agent);
  ctx.scope.defer(() => server.stop(8000));
  const stack: TunnelStack = {
    label,
    modes: ["grpc", "connect"],
    frontendPort: p.agent,
    agentPort: p.agent,
    healthPort: p.health,
    adminPort: p.admin,
    server,
    agent: null,
    delay: null,
  };
  await waitUntil(
    async () => {
      if (!server.alive) throw new Error("server exited");
      return (await httpStatus(p.health, "/readyz")) === 200;
    },
    START_MS,
    `${label} /readyz`,
    () => server.tail(),
  );
  return stack;
}

/** `n` instances of one fleet, the tenant's agent on instance `agentOn`. */
export async function startBenchFleet(
  ctx: StackContext,
  n: number,
  agentOn: number,
  extraArgs?: (label: string) => string[],
): Promise<BenchFleet> {
  const dynamoPort = await startDynalite(ctx);
  const env = { ...localAwsEnv(dynamoPort), ...ctx.childEnv };
  const peerFiles = await writePeerFiles(ctx);
  const ports = await Promise.all(Array.from({ length: n }, () => instancePorts()));
  const created = await createTenant(ctx, env, ports[agentOn]!.agent);
  const instances: TunnelStack[] = [];
  for (const [i, p] of ports.entries()) {
    instances.push(await startFleetInstance(ctx, env, peerFiles, p, `kgw-fleet-${i + 1}`, extraArgs));
  }
  const home = instances[agentOn]!;
  const agent = await startKgwAgent(ctx, home, { agentId: TENANT, token: created.agentToken });
  home.agent = agent;
  await waitUntil(
    async () => (await httpStatus(home.adminPort, `/readyz?tenant=${TENANT}`)) === 200,
    START_MS,
    `${home.label} /readyz?tenant=${TENANT}`,
    () => [home.server.tail(), agent.tail()].join("\n"),
  );
  const files = created.bundle.files;
  const callers: BenchPki = {
    ...ctx.pki,
    caPem: readFileSync(files.caBundle, "utf8"),
    frontendCertPem: readFileSync(files.clientCert, "utf8"),
    frontendKeyPem: readFileSync(files.clientKey, "utf8"),
    remove: () => {},
  };
  return { instances, callers, agent };
}
