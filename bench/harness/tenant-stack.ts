/**
 * kgw in tenant mode, set up as an operator sets it up: one tenant made with
 * `kgw tenant create` (a child process, its JSON output in a file), the server on that tenant
 * store, our agent with the tenant's agent token, and callers with the caller certificate of the
 * tenant's bundle, on the agent port, where a tenant's kube-apiserver dials in tenant mode.
 * Everything else is as in the single-tenant kgw stack (same binaries, flags, TLS, log level), so
 * that the ratio of the two is what tenancy costs: its identity checks and the shared port.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import path from "node:path";
import type { BenchPki } from "./pki.js";
import { freePort, LOOPBACK } from "./ports.js";
import { Child } from "./procs.js";
import { KGW_BIN, NODE, type StackContext, type StackOptions, startKgw, type TunnelStack } from "./stacks.js";
import { withTimeout } from "./util.js";

/** One tenant is enough: a dial looks up its caller's tenant, not all of them. */
const TENANT_ID = "bench";
const CREATE_MS = 30_000;

export interface TenantStack {
  stack: TunnelStack;
  /**
   * The PKI as the tenant's callers see it: the bundle's CA and caller certificate in place of
   * the frontend caller's, so the openers (paths.ts, raw.ts) take it as they take the PKI.
   */
  callers: BenchPki;
}

/** What `kgw tenant create --output=json` prints that the benchmark uses. */
interface CreateOutput {
  agentToken: string;
  bundle: { files: { caBundle: string; clientCert: string; clientKey: string } };
}

/**
 * `kgw tenant create` on a new store, with the benchmark's CA as the gateway CA. Its output
 * (which holds the agent token) goes to a private file in the PKI's directory, removed with it;
 * its stderr to the scenario's output like every child's.
 */
async function createTenant(
  ctx: StackContext,
  agentPort: number,
): Promise<{ storeDir: string } & CreateOutput> {
  const dir = mkdtempSync(path.join(ctx.pki.dir, "tenant-"));
  const storeDir = path.join(dir, "store");
  const json = path.join(dir, "create.json");
  const child = new Child(
    "kgw-tenant-create",
    ctx.output.fileFor("kgw-tenant-create"),
    NODE,
    // The backend is on 127.0.0.1, which a tenant's default egress policy refuses; this
    // "cluster"'s operator allows it. Every rule of the default stays: each dial is judged as usual.
    [
      KGW_BIN,
      "tenant",
      "create",
      TENANT_ID,
      "--allow-loopback",
      "--output=json",
      `--out=${path.join(dir, "bundle")}`,
    ],
    {
      KGW_TENANT_STORE_DIR: storeDir,
      KGW_CA_CERT: ctx.pki.files.caCert,
      KGW_CA_KEY: ctx.pki.files.caKey,
      // Only the bundle's egress configuration names it; nothing here reads that.
      KGW_GATEWAY_ADDRESS: `${LOOPBACK}:${agentPort}`,
    },
    json,
  );
  ctx.scope.defer(() => child.stop());
  const { code, signal } = await withTimeout(child.exited, CREATE_MS, "kgw tenant create");
  if (code !== 0)
    throw new Error(`kgw tenant create exited (code ${code}, signal ${signal})\n${child.tail()}`);
  return { storeDir, ...(JSON.parse(readFileSync(json, "utf8")) as CreateOutput) };
}

export async function startKgwTenant(ctx: StackContext, opts: StackOptions = {}): Promise<TenantStack> {
  const agentPort = await freePort();
  const tenant = await createTenant(ctx, agentPort);
  const stack = await startKgw(ctx, opts, {
    storeDir: tenant.storeDir,
    agentPort,
    agentToken: tenant.agentToken,
  });
  const files = tenant.bundle.files;
  const callers: BenchPki = {
    ...ctx.pki,
    caPem: readFileSync(files.caBundle, "utf8"),
    frontendCertPem: readFileSync(files.clientCert, "utf8"),
    frontendKeyPem: readFileSync(files.clientKey, "utf8"),
    // The run's PKI is the run's to remove.
    remove: () => {},
  };
  return { stack, callers };
}
