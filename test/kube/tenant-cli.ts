/**
 * `kgw tenant` as an operator runs it: the CLI as a child process (from source, like the server
 * and agent this suite runs), configured by the environment variables the docs show, with the
 * suite's CA as the gateway CA. It needs no network, so it runs outside the namespace; only its
 * files are shared.
 */
import { execFile } from "node:child_process";
import type { TestPki } from "../helpers/pki.js";
import { KGW_ENTRY } from "./servers.js";

/** What `kgw tenant create --output=json` prints, as far as the suite uses it. */
export interface CreatedTenant {
  /** Printed once: the agents' bearer token. */
  agentToken: string;
  bundle: {
    dir: string;
    files: { caBundle: string; clientCert: string; clientKey: string; egressTcp: string; egressUds: string };
    /** The caller certificate's serial: its credential id for `revoke`. */
    serial: string;
  };
}

export interface TenantCli {
  /** `kgw tenant create ID --out DIR --mount-dir DIR --gateway-address ADDR`: the bundle is used where it is written. */
  create(id: string, bundleDir: string, gatewayAddress: string): Promise<CreatedTenant>;
  revoke(id: string, credentialId: string): Promise<void>;
  /** `kgw tenant policy ID --set RULE...`, or `--default` when `rules` is "default". */
  policy(id: string, rules: string[] | "default"): Promise<void>;
}

export function tenantCli(storeDir: string, pki: TestPki): TenantCli {
  const env = {
    ...process.env,
    KGW_TENANT_STORE_DIR: storeDir,
    KGW_CA_CERT: pki.files.caCert,
    KGW_CA_KEY: pki.files.caKey,
  };
  const run = (args: string[]): Promise<unknown> =>
    new Promise((resolve, reject) =>
      execFile(
        process.execPath,
        ["--import", "tsx", KGW_ENTRY, "tenant", ...args, "--output=json"],
        { env, timeout: 30_000 },
        (err, out, errOut) =>
          err
            ? reject(new Error(`kgw tenant ${args.join(" ")}: ${err.message}\n${errOut}`))
            : resolve(out.trim() === "" ? undefined : JSON.parse(out)),
      ),
    );
  return {
    create: async (id, bundleDir, gatewayAddress) =>
      (await run([
        "create",
        id,
        `--out=${bundleDir}`,
        `--mount-dir=${bundleDir}`,
        `--gateway-address=${gatewayAddress}`,
      ])) as CreatedTenant,
    revoke: async (id, credentialId) => {
      await run(["revoke", id, credentialId, "--yes"]);
    },
    policy: async (id, rules) => {
      await run(["policy", id, ...(rules === "default" ? ["--default"] : ["--set", ...rules])]);
    },
  };
}
