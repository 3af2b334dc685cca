/**
 * `kgw tenant …`: carries out one parsed command (lib/config/tenant-options.ts) against the file
 * store and prints the result. Secrets are printed exactly once, by the command that made them
 * (create, rotate); everything else prints the public view (render.ts).
 */
import type { OutputFormat, TenantCommand } from "../../config/tenant-options.js";
import { ConfigError, GatewayError } from "../../errors.js";
import { writeAgentBundle } from "../bundle/agent-bundle.js";
import { type WrittenBundle, writeCallerBundle } from "../bundle/caller-bundle.js";
import { TenantNotFoundError } from "../errors.js";
import { openFileTenantStore } from "../file-store/file-tenant-store.js";
import { updateTenant } from "../mutate.js";
import {
  addToken,
  createTenantRecord,
  deleteTenantRecord,
  findCredential,
  requireActive,
  revokeCredential,
} from "../operations.js";
import type { TenantStore } from "../store.js";
import { normalizeSerial } from "../tenant-uri.js";
import { type GeneratedToken, generateToken } from "../tokens.js";
import { loadAgentBundleOptions, loadBundleOptions } from "./load-bundle-options.js";
import {
  agentBundleText,
  agentBundleView,
  bundleText,
  bundleView,
  publicTenant,
  rotatedText,
  tenantDetails,
  tenantTable,
} from "./render.js";

export interface TenantCliIo {
  out(text: string): void;
  err(text: string): void;
  /** The clock; tests move it. */
  now?: () => Date;
}

/** Exit codes: 0 done, 1 failed (not found, conflict, store trouble), 2 bad usage or input. */
export async function runTenantCommand(command: TenantCommand, io: TenantCliIo): Promise<number> {
  const now = io.now ?? (() => new Date());
  let store: TenantStore | undefined;
  try {
    store = await openFileTenantStore(command.storeDir, { create: command.name === "create" });
    return await execute(command, store, { ...io, now });
  } catch (err) {
    if (!(err instanceof GatewayError)) throw err;
    io.err(`kgw tenant ${command.name}: ${err.message}\n`);
    return err instanceof ConfigError || err.code === "ERR_BAD_REQUEST" ? 2 : 1;
  } finally {
    await store?.close();
  }
}

type Io = Required<TenantCliIo>;

async function execute(command: TenantCommand, store: TenantStore, io: Io): Promise<number> {
  const print = printer(command.output, io);
  switch (command.name) {
    case "create": {
      // Load the CA before creating anything: a wrong path must not leave a tenant half made.
      const bundle = command.bundle ? await loadBundleOptions(command.bundle, io.now) : null;
      let agent: GeneratedToken | undefined;
      let caller: GeneratedToken | undefined;
      const record = await updateTenant(store, command.tenantId, (current) => {
        const t = io.now();
        agent = generateToken("agent", command.tenantId);
        let r = createTenantRecord({ id: command.tenantId, displayName: command.displayName }, current, t);
        r = addToken(r, "agent-token", agent, t);
        if (command.callerToken) {
          caller = generateToken("caller", command.tenantId);
          r = addToken(r, "caller-token", caller, t);
        }
        return r;
      });
      // The token exists only in this process now: print it before anything else can fail.
      const secrets = { agentToken: agent!.token, ...(caller ? { callerToken: caller.token } : {}) };
      let written: WrittenBundle | undefined;
      let bundleError: GatewayError | Error | undefined;
      if (bundle) {
        written = await writeCallerBundle(store, command.tenantId, bundle).catch((err: Error) => {
          bundleError = err;
          return undefined;
        });
      }
      print(
        {
          tenant: publicTenant(written?.record ?? record, io.now()),
          ...secrets,
          bundle: bundleView(written),
        },
        () =>
          [
            `Created tenant ${record.id}.`,
            "",
            "Agent token (shown once; only its SHA-256 is stored):",
            `  ${agent!.token}`,
            ...(caller
              ? ["", "Caller token for CONNECT Proxy-Authorization (shown once):", `  ${caller.token}`]
              : []),
            ...(written ? ["", ...bundleText(written, bundle!)] : []),
            "",
          ].join("\n"),
      );
      if (bundleError) {
        io.err(
          `kgw tenant create: the tenant exists, but its bundle was not written: ${bundleError.message}\n` +
            `run "kgw tenant bundle ${record.id}" once the problem is fixed\n`,
        );
        return 1;
      }
      return 0;
    }
    case "list": {
      const listing = await store.list();
      const tenants = listing.tenants.filter((t) => command.all || t.state !== "deleted");
      print({ tenants: tenants.map((t) => publicTenant(t, io.now())) }, () => tenantTable(tenants, io.now()));
      for (const bad of listing.unreadable) io.err(`kgw tenant list: ${bad.message}\n`);
      return listing.unreadable.length > 0 ? 1 : 0;
    }
    case "show": {
      const record = await store.get(command.tenantId);
      if (!record) throw new TenantNotFoundError(`tenant ${command.tenantId}`);
      print({ tenant: publicTenant(record, io.now()) }, () => tenantDetails(record, io.now()));
      return 0;
    }
    case "rotate": {
      if (command.credential === "caller-certificate") {
        const options = await loadBundleOptions(command.bundle!, io.now);
        const written = await writeCallerBundle(store, command.tenantId, options, {
          rotateGraceMs: command.graceMs,
        });
        print({ tenant: publicTenant(written.record, io.now()), bundle: bundleView(written) }, () =>
          [
            ...rotatedText(written.record, "caller-certificate", written.serial),
            "",
            ...bundleText(written, options),
            "",
          ].join("\n"),
        );
        return 0;
      }
      if (command.credential === "agent-certificate") {
        const settings = command.agentBundle!;
        const options = await loadAgentBundleOptions(settings, io.now);
        const written = await writeAgentBundle(store, command.tenantId, options, {
          rotateGraceMs: command.graceMs,
        });
        print({ tenant: publicTenant(written.record, io.now()), agentBundle: agentBundleView(written) }, () =>
          [
            ...rotatedText(written.record, "agent-certificate", written.serial),
            "",
            ...agentBundleText(written, settings.mountDir, io.now()),
            "",
          ].join("\n"),
        );
        return 0;
      }
      const kind = command.credential;
      let token: GeneratedToken | undefined;
      const record = await updateTenant(store, command.tenantId, (current) => {
        token = generateToken(kind === "agent-token" ? "agent" : "caller", command.tenantId);
        return addToken(requireActive(current, command.tenantId), kind, token, io.now(), {
          rotateGraceMs: command.graceMs,
        });
      });
      print({ tenant: publicTenant(record, io.now()), token: token!.token }, () =>
        [
          ...rotatedText(record, kind, token!.id),
          "",
          "New token (shown once; only its SHA-256 is stored):",
          `  ${token!.token}`,
          "",
        ].join("\n"),
      );
      return 0;
    }
    case "revoke": {
      const record = await updateTenant(store, command.tenantId, (current) => {
        const active = requireActive(current, command.tenantId);
        // As typed, or as a serial printed with colons or leading zeros (openssl does both).
        const id = findCredential(active, command.credentialId)
          ? command.credentialId
          : (normalizeSerial(command.credentialId) ?? command.credentialId);
        return revokeCredential(active, id, io.now());
      });
      print(
        { tenant: publicTenant(record, io.now()) },
        () => `Revoked ${command.credentialId} of tenant ${record.id}.\n`,
      );
      return 0;
    }
    case "delete": {
      const record = await updateTenant(store, command.tenantId, (current) =>
        deleteTenantRecord(requireActive(current, command.tenantId), io.now()),
      );
      print(
        { tenant: publicTenant(record, io.now()) },
        () =>
          `Deleted tenant ${record.id}: gateways refuse its credentials from their next read of the store.\n`,
      );
      return 0;
    }
    case "bundle": {
      const options = await loadBundleOptions(command.bundle, io.now);
      const written = await writeCallerBundle(store, command.tenantId, options);
      print({ tenant: publicTenant(written.record, io.now()), bundle: bundleView(written) }, () =>
        [...bundleText(written, options), ""].join("\n"),
      );
      return 0;
    }
  }
}

function printer(format: OutputFormat, io: Io) {
  return (json: object, text: () => string) => {
    io.out(format === "json" ? `${JSON.stringify(json, null, 2)}\n` : text());
  };
}
