/**
 * kgw in tenant mode, set up as an operator sets it up: tenants made with `kgw tenant create`
 * (child processes, their JSON output in files), quotas set with `kgw tenant quota`, the server
 * on that tenant store, our agent for each tenant with the tenant's agent token, and callers with
 * the caller certificate of their tenant's bundle, on the agent port, where a tenant's
 * kube-apiserver dials in tenant mode. Everything else is as in the single-tenant kgw stack (same
 * binaries, flags, TLS, log level), so that the ratio of the two is what tenancy costs: its
 * identity checks and the shared port.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import path from "node:path";
import type { BenchPki } from "./pki.js";
import { freePort, LOOPBACK } from "./ports.js";
import { Child } from "./procs.js";
import {
  httpStatus,
  KGW_BIN,
  NODE,
  type StackContext,
  type StackOptions,
  startDelay,
  startKgwAgent,
  startKgwServer,
  type TunnelStack,
} from "./stacks.js";
import { waitUntil, withTimeout } from "./util.js";

/** One tenant is enough to measure what tenancy costs: a dial looks up its caller's tenant, not all of them. */
const TENANT_ID = "bench";
const CLI_MS = 30_000;
const READY_MS = 20_000;

export interface TenantStack {
  stack: TunnelStack;
  /**
   * The PKI as the tenant's callers see it: the bundle's CA and caller certificate in place of
   * the frontend caller's, so the openers (paths.ts, raw.ts) take it as they take the PKI.
   */
  callers: BenchPki;
}

/** A tenant to make: its id, and the flags of `kgw tenant quota` when it gets quotas of its own. */
export interface TenantSpec {
  id: string;
  quota?: string[];
}

/** One tenant of a running tenant-mode gateway. */
export interface BenchTenant {
  id: string;
  /** As in TenantStack: the bundle's CA and caller certificate. */
  callers: BenchPki;
  /** The same as files, for a child process that dials as this tenant. */
  callerFiles: { caBundle: string; clientCert: string; clientKey: string };
  /** Our agent, with this tenant's agent token. */
  agent: Child;
}

export interface TenantsStack {
  stack: TunnelStack;
  tenants: Record<string, BenchTenant>;
}

/** What `kgw tenant create --output=json` prints that the benchmark uses. */
interface CreateOutput {
  agentToken: string;
  bundle: { files: { caBundle: string; clientCert: string; clientKey: string } };
}

/** Runs `kgw tenant …` on the store as a child process, its output in the scenario's files. */
async function tenantCli(
  ctx: StackContext,
  what: string,
  args: string[],
  env: Record<string, string>,
  stdoutFile?: string,
): Promise<void> {
  const name = `kgw-tenant-${what}`;
  const child = new Child(
    name,
    ctx.output.fileFor(name),
    NODE,
    [KGW_BIN, "tenant", ...args],
    env,
    stdoutFile,
  );
  ctx.scope.defer(() => child.stop());
  const { code, signal } = await withTimeout(child.exited, CLI_MS, `kgw tenant ${args[0]}`);
  if (code !== 0)
    throw new Error(`kgw tenant ${args[0]} exited (code ${code}, signal ${signal})\n${child.tail()}`);
}

/**
 * `kgw tenant create` on the store, with the benchmark's CA as the gateway CA, then
 * `kgw tenant quota` when the spec has quotas. The create output (which holds the agent token)
 * goes to a private file in the PKI's directory, removed with it; stderr to the scenario's
 * output like every child's.
 */
async function createTenant(
  ctx: StackContext,
  storeDir: string,
  agentPort: number,
  spec: TenantSpec,
): Promise<CreateOutput> {
  const dir = mkdtempSync(path.join(ctx.pki.dir, `tenant-${spec.id}-`));
  const json = path.join(dir, "create.json");
  const env = {
    KGW_TENANT_STORE_DIR: storeDir,
    KGW_CA_CERT: ctx.pki.files.caCert,
    KGW_CA_KEY: ctx.pki.files.caKey,
    // Only the bundle's egress configuration names it; nothing here reads that.
    KGW_GATEWAY_ADDRESS: `${LOOPBACK}:${agentPort}`,
  };
  // The backend is on 127.0.0.1, which a tenant's default egress policy refuses; this
  // "cluster"'s operator allows it. Every rule of the default stays: each dial is judged as usual.
  await tenantCli(
    ctx,
    `create-${spec.id}`,
    ["create", spec.id, "--allow-loopback", "--output=json", `--out=${path.join(dir, "bundle")}`],
    env,
    json,
  );
  if (spec.quota) await tenantCli(ctx, `quota-${spec.id}`, ["quota", spec.id, ...spec.quota], env);
  return JSON.parse(readFileSync(json, "utf8")) as CreateOutput;
}

function callersOf(ctx: StackContext, files: CreateOutput["bundle"]["files"]): BenchPki {
  return {
    ...ctx.pki,
    caPem: readFileSync(files.caBundle, "utf8"),
    frontendCertPem: readFileSync(files.clientCert, "utf8"),
    frontendKeyPem: readFileSync(files.clientKey, "utf8"),
    // The run's PKI is the run's to remove.
    remove: () => {},
  };
}

/**
 * One kgw server in tenant mode with the tenants of `specs` (made one after the other on a new
 * store, before the server starts), each with our agent; resolves once the server reports every
 * tenant ready (`/readyz?tenant=T` on its admin port).
 */
export async function startKgwTenants(
  ctx: StackContext,
  specs: TenantSpec[],
  opts: StackOptions = {},
): Promise<TenantsStack> {
  if (specs.length === 0) throw new Error("startKgwTenants: no tenant");
  const agentPort = await freePort();
  const storeDir = path.join(mkdtempSync(path.join(ctx.pki.dir, "tenants-")), "store");
  const created: CreateOutput[] = [];
  for (const spec of specs) created.push(await createTenant(ctx, storeDir, agentPort, spec));
  const stack = await startKgwServer(ctx, { storeDir, agentPort, agentToken: created[0]!.agentToken });
  const delay =
    opts.delayMsEachWay === undefined ? null : await startDelay(ctx, agentPort, opts.delayMsEachWay);
  stack.delay = delay?.child ?? null;
  const tenants: Record<string, BenchTenant> = {};
  for (const [i, spec] of specs.entries()) {
    const { agentToken, bundle } = created[i]!;
    const agent = await startKgwAgent(ctx, stack, {
      viaPort: delay?.port,
      agentId: spec.id,
      token: agentToken,
    });
    tenants[spec.id] = {
      id: spec.id,
      callers: callersOf(ctx, bundle.files),
      callerFiles: bundle.files,
      agent,
    };
  }
  stack.agent = tenants[specs[0]!.id]!.agent;
  for (const spec of specs) {
    await waitUntil(
      async () => {
        if (!stack.server.alive) throw new Error("server exited");
        return (await httpStatus(stack.adminPort, `/readyz?tenant=${spec.id}`)) === 200;
      },
      READY_MS,
      `${stack.label} /readyz?tenant=${spec.id}`,
      () => [stack.server.tail(), tenants[spec.id]!.agent.tail()].join("\n"),
    );
  }
  return { stack, tenants };
}

/** kgw in tenant mode with one tenant (the --tenant-mode column of throughput and dial). */
export async function startKgwTenant(ctx: StackContext, opts: StackOptions = {}): Promise<TenantStack> {
  const { stack, tenants } = await startKgwTenants(ctx, [{ id: TENANT_ID }], opts);
  return { stack, callers: tenants[TENANT_ID]!.callers };
}
