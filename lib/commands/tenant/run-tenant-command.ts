/**
 * `kgw tenant …`: carries out one parsed command (parse-tenant-command.ts) against the file
 * store (or, with --table, the DynamoDB store) and prints the result. Secrets are printed exactly
 * once, by the command that made them (create, rotate, manifest); everything else prints the
 * public view (render.ts).
 */

import { DEFAULT_EGRESS_POLICY } from "../../egress/egress-policy.js";
import { lintEgressPolicy } from "../../egress/rule-lint.js";
import { ConfigError, GatewayError } from "../../errors.js";
import { writeAgentBundle } from "../../tenancy/bundle/agent-bundle.js";
import { type WrittenBundle, writeCallerBundle } from "../../tenancy/bundle/caller-bundle.js";
import { openDynamoTenantStore } from "../../tenancy/dynamo-store/dynamo-tenant-store.js";
import { openFileTenantStore } from "../../tenancy/file-store/file-tenant-store.js";
import { issueInstallToken } from "../../tenancy/install/store-operations.js";
import { InvalidManifestInputError } from "../../tenancy/manifest/errors.js";
import type { AgentManifestInput } from "../../tenancy/manifest/input.js";
import { readManifestCaBundle, writeManifestFile } from "../../tenancy/manifest/manifest-file.js";
import { mintAgentToken } from "../../tenancy/manifest/mint-agent-token.js";
import { renderAgentManifest } from "../../tenancy/manifest/render.js";
import { updateTenant } from "../../tenancy/mutate.js";
import {
  addToken,
  createTenantRecord,
  deleteTenantRecord,
  requireActive,
  revokeCredential,
  setEgressPolicy,
  setQuotas,
} from "../../tenancy/operations.js";
import type { TenantStore } from "../../tenancy/store.js";
import { type GeneratedToken, generateToken } from "../../tenancy/tokens.js";
import { NO_TERMINAL } from "../confirm.js";
import { EXIT, exitCodeFor } from "../exit-codes.js";
import { confirmOrSay, credentialIdIn } from "./confirm-change.js";
import { loadAgentBundleOptions, loadBundleOptions, readCaSecret } from "./load-bundle-options.js";
import type { OutputFormat, TenantCommand } from "./parse-tenant-command.js";
import {
  agentBundleText,
  agentBundleView,
  bundleText,
  bundleView,
  egressText,
  installText,
  manifestText,
  publicTenant,
  quotaText,
  rotatedText,
  tenantTable,
} from "./render.js";
import { showTenant } from "./show-tenant.js";
import type { Io, TenantCliIo } from "./tenant-io.js";

/** Exit codes: lib/commands/exit-codes.ts (0 done, 1 failed, 2 usage, 3 not found, 4 already so, 5 not confirmed). */
export async function runTenantCommand(command: TenantCommand, io: TenantCliIo): Promise<number> {
  const now = io.now ?? (() => new Date());
  let store: TenantStore | undefined;
  try {
    store = command.table
      ? openDynamoTenantStore({ tableName: command.table })
      : await openFileTenantStore(command.storeDir, { create: command.name === "create" });
    return await execute(command, store, { ...io, now, prompter: io.prompter ?? NO_TERMINAL });
  } catch (err) {
    if (!(err instanceof GatewayError)) throw err;
    io.err(`kgw tenant ${command.name}: ${err.message}\n`);
    return exitCodeFor(err);
  } finally {
    await store?.close();
  }
}

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
        // In the same write: a gateway must never see the tenant with a policy it was not given.
        if (command.egress) r = setEgressPolicy(r, command.egress, t);
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
    case "quota": {
      let record = await store.get(command.tenantId);
      const changed = Object.keys(command.changes).length > 0;
      if (changed) {
        record = await updateTenant(store, command.tenantId, (current) =>
          setQuotas(requireActive(current, command.tenantId), command.changes, io.now()),
        );
      }
      const active = requireActive(record, command.tenantId);
      print({ tenant: active.id, version: active.version, quotas: active.quotas }, () =>
        quotaText(active, changed),
      );
      return 0;
    }
    case "policy": {
      const { change } = command;
      let record = await store.get(command.tenantId);
      if (change !== null) {
        const policy = change === "default" ? DEFAULT_EGRESS_POLICY : change;
        // Written all the same (the operator may mean it), but never silently.
        for (const w of lintEgressPolicy(policy))
          io.err(`kgw tenant policy: warning: rule ${w.rule} ${w.why}\n`);
        record = await updateTenant(store, command.tenantId, (current) =>
          setEgressPolicy(requireActive(current, command.tenantId), policy, io.now()),
        );
      }
      const active = requireActive(record, command.tenantId);
      print({ tenant: active.id, version: active.version, egress: active.egress }, () =>
        egressText(active, change !== null),
      );
      return 0;
    }
    case "show":
      return showTenant(command, store, io);
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
      // Checked before asking: a mistyped id is "not found", not a question.
      const before = requireActive(await store.get(command.tenantId), command.tenantId);
      revokeCredential(before, credentialIdIn(before, command.credentialId), io.now());
      const asked = await confirmOrSay(
        command,
        {
          action: `Revoke credential ${command.credentialId} of tenant ${before.id}: it is refused from now on.`,
          expect: "yes",
        },
        io,
      );
      if (asked !== EXIT.OK) return asked;
      const record = await updateTenant(store, command.tenantId, (current) => {
        const active = requireActive(current, command.tenantId);
        return revokeCredential(active, credentialIdIn(active, command.credentialId), io.now());
      });
      print(
        { tenant: publicTenant(record, io.now()) },
        () => `Revoked ${command.credentialId} of tenant ${record.id}.\n`,
      );
      return 0;
    }
    case "delete": {
      const before = requireActive(await store.get(command.tenantId), command.tenantId);
      const asked = await confirmOrSay(
        command,
        {
          action: `Delete tenant ${before.id}: all its credentials stop working, its agents and callers are refused.`,
          expect: { exactly: before.id },
        },
        io,
      );
      if (asked !== EXIT.OK) return asked;
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
    case "manifest":
      return manifest(command, store, io);
    case "install-token": {
      const s = command.install;
      const issued = await issueInstallToken(
        store,
        command.tenantId,
        { ttlMs: s.ttlMs, singleUse: s.singleUse },
        io.now,
      );
      const url = `${s.gateway.url}/v1/install/${issued.token}.yaml`;
      const lines = {
        kubectl: `kubectl apply -f ${url}`,
        curl:
          s.caBundle === null
            ? null
            : `curl --cacert ${shellWord(s.caBundle)} -fsSL ${url} | kubectl apply -f -`,
      };
      const view = { tokenId: issued.tokenId, expiresAt: issued.expiresAt, singleUse: s.singleUse };
      print(
        {
          tenant: publicTenant(issued.record, io.now()),
          installToken: { ...view, token: issued.token, url },
          command: lines.kubectl,
          curlCommand: lines.curl,
        },
        () => installText(command.tenantId, view, lines),
      );
      return 0;
    }
  }
}

/** A path as one shell word: as is when plain, single-quoted otherwise. */
function shellWord(text: string): string {
  return /^[A-Za-z0-9_./:=@%+-]+$/.test(text) ? text : `'${text.replaceAll("'", "'\\''")}'`;
}

/**
 * Every check runs before a token is minted: the CA file is read, and the manifest is rendered
 * once with a throwaway token that is never stored. Then the token is minted and the manifest
 * rendered for real; the YAML goes to --out (0600) or to stdout, where it can be piped to
 * kubectl, so everything else goes to stderr.
 */
async function manifest(
  command: Extract<TenantCommand, { name: "manifest" }>,
  store: TenantStore,
  io: Io,
): Promise<number> {
  const s = command.manifest;
  const caPem =
    s.caBundleFlag === "--ca-secret"
      ? (await readCaSecret(s.caBundle)).certPem
      : await readManifestCaBundle(s.caBundle, s.caBundleFlag);
  const input = (agentToken: string): AgentManifestInput => ({
    tenantId: command.tenantId,
    gateway: { host: s.gateway.host, port: s.gateway.port },
    caPem,
    agentToken,
    image: s.image,
    namespace: s.namespace,
    replicas: s.replicas,
    flavor: s.flavor,
  });
  try {
    renderAgentManifest(input(generateToken("agent", command.tenantId).token));
  } catch (err) {
    if (err instanceof InvalidManifestInputError && err.field === "caPem") {
      throw new ConfigError(`${s.caBundleFlag}: ${s.caBundle}: ${err.reason}`);
    }
    throw err;
  }
  const minted = await mintAgentToken(store, command.tenantId, io.now);
  const yaml = renderAgentManifest(input(minted.token));
  let file: string | null = null;
  if (s.outFile !== null) {
    try {
      file = await writeManifestFile(s.outFile, yaml);
    } catch (err) {
      io.err(
        `kgw tenant manifest: the manifest was not written to ${s.outFile}: ${(err as Error).message}\n` +
          `its agent token ${minted.tokenId} is listed but unused: kgw tenant revoke ${command.tenantId} ${minted.tokenId}\n`,
      );
      return 1;
    }
  }
  const tenant = publicTenant(minted.record, io.now());
  if (command.output === "json") {
    const where = file === null ? { manifest: yaml } : { file };
    io.out(`${JSON.stringify({ tenant, agentTokenId: minted.tokenId, ...where }, null, 2)}\n`);
  } else if (file === null) {
    io.out(yaml);
    io.err(`${manifestText(command.tenantId, minted.tokenId, null).join("\n")}\n`);
  } else {
    io.out(`${manifestText(command.tenantId, minted.tokenId, file).join("\n")}\n`);
  }
  return 0;
}

function printer(format: OutputFormat, io: Io) {
  return (json: object, text: () => string) => {
    io.out(format === "json" ? `${JSON.stringify(json, null, 2)}\n` : text());
  };
}
