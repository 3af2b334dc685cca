/**
 * Tenants for tests, made the way an operator makes them: through `kgw tenant` (parsed and run
 * in-process, JSON output) on a store in a temporary directory, with the test CA as the gateway
 * CA. Nothing here writes records by hand, so what the tests see is what a deployment would.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseTenantCommand } from "../../lib/commands/tenant/parse-tenant-command.js";
import { runTenantCommand } from "../../lib/commands/tenant/run-tenant-command.js";
import type { TestPki } from "./pki.js";

export interface CreatedTenant {
  id: string;
  agentToken: string;
  callerToken: string;
  /** The caller bundle's directory (client certificate and key, CA bundle, egress configurations). */
  bundleDir: string;
  bundleFiles: Record<string, string>;
  /** The caller certificate's serial (its credential id). */
  callerSerial: string;
}

export interface TestTenantStore {
  dir: string;
  /** Runs `kgw tenant <args>` on this store; resolves with its parsed JSON output. */
  run(args: string[]): Promise<unknown>;
  /**
   * `kgw tenant create --allow-loopback` (unless `allowLoopback: false`): the tests' "cluster" is
   * 127.0.0.1, which a tenant's default egress policy refuses.
   */
  create(id: string, opts?: { allowLoopback?: boolean }): Promise<CreatedTenant>;
  remove(): void;
}

export function makeTenantStore(pki: TestPki, gatewayAddress = "127.0.0.1:8132"): TestTenantStore {
  const dir = mkdtempSync(path.join(tmpdir(), "kgw-tenants-"));
  const env = {
    KGW_TENANT_STORE_DIR: path.join(dir, "store"),
    KGW_CA_CERT: pki.files.caCert,
    KGW_CA_KEY: pki.files.caKey,
    KGW_GATEWAY_ADDRESS: gatewayAddress,
  };
  const run = async (args: string[]): Promise<unknown> => {
    const parsed = parseTenantCommand([...args, "--output=json"], env);
    if (parsed.help) throw new Error("unexpected help");
    let out = "";
    let err = "";
    const code = await runTenantCommand(parsed.command, {
      out: (t) => {
        out += t;
      },
      err: (t) => {
        err += t;
      },
    });
    if (code !== 0) throw new Error(`kgw tenant ${args.join(" ")} exited ${code}: ${err}`);
    return out.trim() === "" ? undefined : JSON.parse(out);
  };
  return {
    dir: env.KGW_TENANT_STORE_DIR,
    run,
    create: async (id, opts = {}) => {
      const bundleDir = path.join(dir, `bundle-${id}`);
      const loopback = opts.allowLoopback === false ? [] : ["--allow-loopback"];
      const result = (await run(["create", id, "--caller-token", ...loopback, `--out=${bundleDir}`])) as {
        agentToken: string;
        callerToken: string;
        bundle: { dir: string; files: Record<string, string>; serial: string };
      };
      return {
        id,
        agentToken: result.agentToken,
        callerToken: result.callerToken,
        bundleDir: result.bundle.dir,
        bundleFiles: result.bundle.files,
        callerSerial: result.bundle.serial,
      };
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
