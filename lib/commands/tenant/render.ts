/**
 * What `kgw tenant` prints about tenants. Built from a public view that holds no secret and no
 * hash, so no output path can leak one; text fields come from validated records (printable,
 * bounded), so nothing printed can drive the terminal.
 */

import type { WrittenAgentBundle } from "../../tenancy/bundle/agent-bundle.js";
import type { CallerBundleOptions, WrittenBundle } from "../../tenancy/bundle/caller-bundle.js";
import { BUNDLE_FILES } from "../../tenancy/bundle/egress-selector.js";
import { type CredentialStatus, credentialStatus, isUsable } from "../../tenancy/credential-status.js";
import { type InstallTokenStatus, installTokenStatus } from "../../tenancy/install/install-tokens.js";
import {
  CREDENTIAL_KINDS,
  type CredentialKind,
  credentialsOf,
  type TenantRecord,
} from "../../tenancy/model.js";
import { QUOTA_NAMES } from "../../tenancy/quotas.js";

export interface PublicCredential {
  kind: CredentialKind;
  id: string;
  status: CredentialStatus;
  createdAt: string;
  expiresAt: string | null;
  revokedAt: string | null;
  subject?: string;
  uri?: string;
  notAfter?: string;
}

/** An install token as `show` prints it: never the secret, never the hash. */
export interface PublicInstallToken {
  id: string;
  status: InstallTokenStatus;
  singleUse: boolean;
  createdAt: string;
  expiresAt: string;
  usedAt: string | null;
  revokedAt: string | null;
}

export interface PublicTenant {
  id: string;
  displayName: string;
  state: TenantRecord["state"];
  version: number;
  createdAt: string;
  updatedAt: string;
  credentials: PublicCredential[];
  installTokens: PublicInstallToken[];
}

export function publicTenant(record: TenantRecord, now: Date): PublicTenant {
  const credentials: PublicCredential[] = [];
  for (const kind of CREDENTIAL_KINDS) {
    for (const c of credentialsOf(record, kind)) {
      // Field by field, never a spread: a hash must not ride along.
      const view: PublicCredential = {
        kind,
        id: c.id,
        status: credentialStatus(c, now),
        createdAt: c.createdAt,
        expiresAt: c.expiresAt,
        revokedAt: c.revokedAt,
      };
      if ("notAfter" in c) Object.assign(view, { subject: c.subject, uri: c.uri, notAfter: c.notAfter });
      credentials.push(view);
    }
  }
  return {
    id: record.id,
    displayName: record.displayName,
    state: record.state,
    version: record.version,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
    credentials,
    // Field by field, as above.
    installTokens: record.installTokens.map((t) => ({
      id: t.id,
      status: installTokenStatus(t, now),
      singleUse: t.singleUse,
      createdAt: t.createdAt,
      expiresAt: t.expiresAt,
      usedAt: t.usedAt,
      revokedAt: t.revokedAt,
    })),
  };
}

export function tenantTable(records: readonly TenantRecord[], now: Date): string {
  const usable = (r: TenantRecord, kind: CredentialKind) =>
    String(credentialsOf(r, kind).filter((c) => isUsable(c, now)).length);
  return table(
    [
      "ID",
      "STATE",
      "VERSION",
      "AGENT TOKENS",
      "AGENT CERTS",
      "CALLER CERTS",
      "CALLER TOKENS",
      "DISPLAY NAME",
    ],
    records.map((r) => [
      r.id,
      r.state,
      String(r.version),
      usable(r, "agent-token"),
      usable(r, "agent-certificate"),
      usable(r, "caller-certificate"),
      usable(r, "caller-token"),
      r.displayName,
    ]),
  );
}

/**
 * `kgw tenant show`: the tenant, then every credential and install link. With `lastUsed` (the
 * live state was asked for), a LAST USED column: when each credential last authenticated on an
 * instance that answered, or "-".
 */
export function tenantDetails(
  record: TenantRecord,
  now: Date,
  lastUsed?: (c: PublicCredential) => string | null,
): string {
  const view = publicTenant(record, now);
  const head = [
    `tenant ${view.id} (${view.displayName}): ${view.state}, version ${view.version}`,
    `created ${view.createdAt}, updated ${view.updatedAt}`,
  ];
  if (view.credentials.length === 0 && view.installTokens.length === 0)
    return `${head.join("\n")}\nno credentials\n`;
  const used = (c: PublicCredential | null) => (lastUsed ? [(c && lastUsed(c)) ?? "-"] : []);
  const rows = view.credentials.map((c) => [
    c.kind,
    c.id,
    c.status,
    c.createdAt,
    c.revokedAt ?? c.expiresAt ?? c.notAfter ?? "-",
    ...used(c),
  ]);
  for (const t of view.installTokens) {
    const ends = t.revokedAt ?? (t.status === "used" ? t.usedAt : null) ?? t.expiresAt;
    rows.push([
      t.singleUse ? "install-token" : "install-token (reusable)",
      t.id,
      t.status,
      t.createdAt,
      ends!,
      ...used(null),
    ]);
  }
  const columns = ["KIND", "ID", "STATUS", "CREATED", "ENDS", ...(lastUsed ? ["LAST USED"] : [])];
  return `${head.join("\n")}\n\n${table(columns, rows)}`;
}

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  return `${[header, ...rows].map(line).join("\n")}\n`;
}

export function rotatedText(record: TenantRecord, kind: CredentialKind, newId: string): string[] {
  const list = credentialsOf(record, kind);
  const graced = list.filter((c) => c.id !== newId && c.expiresAt !== null && c.revokedAt === null);
  const until = graced.map((c) => c.expiresAt!).sort()[0];
  return [
    `Rotated the ${kind} of tenant ${record.id}: new ${newId}.`,
    until ? `The previous ones are accepted until ${until}.` : "There was no previous one still valid.",
  ];
}

export function bundleView(written: WrittenBundle | undefined) {
  if (!written) return undefined;
  return { dir: written.dir, files: written.files, serial: written.serial, notAfter: written.notAfter };
}

export function agentBundleView(written: WrittenAgentBundle) {
  return {
    dir: written.dir,
    files: written.files,
    serial: written.serial,
    notAfter: written.notAfter,
    agentFlags: written.agentFlags,
  };
}

export function bundleText(written: WrittenBundle, options: CallerBundleOptions): string[] {
  return [
    `Caller bundle: ${written.dir}`,
    `  client certificate ${written.serial}, valid until ${written.notAfter}`,
    `  copy its files to ${options.mountDir} on every control-plane node, then run kube-apiserver with`,
    `  --egress-selector-config-file=${options.mountDir}/${BUNDLE_FILES.egressTcp}`,
    `  (${BUNDLE_FILES.egressUds}: the same over the Unix socket ${options.udsName})`,
  ];
}

export function agentBundleText(written: WrittenAgentBundle, mountDir: string, now: Date): string[] {
  const tokens = written.record.agentTokens.filter((c) => isUsable(c, now)).length;
  return [
    `Agent bundle: ${written.dir}`,
    `  agent certificate ${written.serial}, valid until ${written.notAfter}`,
    `  mount its files at ${mountDir} in the agent's pod (e.g. a Secret made with`,
    `  kubectl create secret generic <name> --from-file=${written.dir}), then run the agent with`,
    `  ${written.agentFlags.join(" ")}`,
    // Issuing a certificate leaves the tokens alone; say so, or the operator may think it replaced them.
    ...(tokens > 0
      ? [
          `  The tenant's ${tokens} agent token(s) stay valid: revoke them once every agent uses the certificate.`,
        ]
      : []),
  ];
}

/** What `kgw tenant manifest` says besides the YAML (on stderr when the YAML goes to stdout). */
export function manifestText(tenantId: string, tokenId: string, file: string | null): string[] {
  return [
    `Agent manifest for tenant ${tenantId}${file ? ` written to ${file} (mode 0600)` : ""}, with a new agent token, id ${tokenId}.`,
    "  It holds the token: keep it as a secret. Apply it with kubectl apply -f.",
    "  The tenant's other agent tokens stay valid; revoke the ones no agent uses any more.",
  ];
}

/** `kgw tenant policy`: the rules one per line, then what the flags let through. */
export function egressText(record: TenantRecord, changed: boolean): string {
  const p = record.egress;
  const rules = p.allow.length === 0 ? ["  (none: every dial is refused)"] : p.allow.map((r) => `  ${r}`);
  return [
    `egress policy of tenant ${record.id}${changed ? ` (now version ${record.version})` : ""}:`,
    "allow:",
    ...rules,
    `loopback: ${p.allowLoopback ? "allowed" : "refused"}`,
    `link-local and cloud metadata: ${p.allowLinkLocal ? "allowed" : "refused"}`,
    "",
  ].join("\n");
}

/** `kgw tenant quota`: the tenant's overrides; the rest is the server's default. */
export function quotaText(record: TenantRecord, changed: boolean): string {
  const set = QUOTA_NAMES.filter((q) => record.quotas[q] !== undefined);
  return [
    `quotas of tenant ${record.id}${changed ? ` (now version ${record.version})` : ""}, per gateway instance:`,
    ...QUOTA_NAMES.map((q) => `  ${q}: ${record.quotas[q] ?? "the server's default"}`),
    ...(set.length === 0 ? ["(all from the server's --tenant-* flags)"] : []),
    "",
  ].join("\n");
}

/** `kgw tenant install-token`: the one line, and its curl twin for a privately trusted gateway. */
export function installText(
  tenantId: string,
  issued: { tokenId: string; expiresAt: string; singleUse: boolean },
  lines: { kubectl: string; curl: string | null },
): string {
  return [
    `Install link for tenant ${tenantId}: token id ${issued.tokenId}, ${issued.singleUse ? "single use" : "reusable"}, until ${issued.expiresAt}.`,
    "Run this where kubectl reaches the tenant's cluster (shown once; only its SHA-256 is stored):",
    "",
    `  ${lines.kubectl}`,
    "",
    ...(lines.curl
      ? [
          "If the gateway's certificate is not publicly trusted (kubectl trusts the system's CAs only):",
          "",
          `  ${lines.curl}`,
          "",
        ]
      : []),
    "Anyone holding the link can install an agent of this tenant until it is used or expires;",
    `revoke it with: kgw tenant revoke ${tenantId} ${issued.tokenId}`,
    "",
  ].join("\n");
}
