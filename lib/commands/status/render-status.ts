/**
 * What `kgw status` prints: tables of the status API's answers (status-model.ts). Every cell is
 * cut to a length and stripped of control characters: the answer comes over the network, and
 * nothing in it may drive the terminal.
 */
import type {
  FleetStatus,
  InstanceStatus,
  LastError,
  RecentActivity,
  TenantDetail,
  TenantStatus,
} from "../../server/status/status-model.js";
import { durationText } from "../../util/duration-text.js";

const MAX_CELL_CHARS = 80;

/** One value as a table cell: control characters out, cut to a length. */
export function cell(value: unknown): string {
  if (value === null || value === undefined) return "-";
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is removed
  const text = String(value).replace(/[\u0000-\u001f\u007f-\u009f]/g, "?");
  return text.length > MAX_CELL_CHARS ? `${text.slice(0, MAX_CELL_CHARS - 1)}…` : text;
}

function table(header: string[], rows: unknown[][]): string {
  const cells = rows.map((r) => r.map(cell));
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((r) => r[i]!.length)));
  const line = (row: string[]) =>
    row
      .map((c, i) => (i === row.length - 1 ? c : c.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  return `${[header, ...cells].map(line).join("\n")}\n`;
}

/** An uptime as the tables show it; null (an instance that did not answer) stays null. */
export function duration(seconds: number | null): string | null {
  return seconds === null ? null : durationText(seconds);
}

/** "ok=10 denied=2", or "none". */
function counts(map: Readonly<Record<string, number | undefined>>): string {
  const parts = Object.entries(map)
    .filter(([, n]) => (n ?? 0) > 0)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([k, n]) => `${k}=${n}`);
  return parts.length > 0 ? parts.join(" ") : "none";
}

function total(recent: RecentActivity): number {
  return Object.values(recent.dials).reduce((n: number, v) => n + (v ?? 0), 0);
}

function lastError(e: LastError | null): string {
  return e ? `${e.code ?? e.outcome} at ${e.at} (dial ${e.dialId} on ${e.instance})` : "none";
}

export function instancesTable(instances: readonly InstanceStatus[]): string {
  return table(
    ["INSTANCE", "LEASE", "ANSWERED", "DRAINING", "AGENTS", "TUNNELS", "VERSION", "UPTIME", "PEER", "REASON"],
    instances.map((i) => [
      i.id,
      i.lease,
      i.answered ? "yes" : "no",
      i.draining === null ? null : i.draining ? "yes" : "no",
      i.agents,
      i.tunnels,
      i.version,
      duration(i.uptimeSeconds),
      i.peerAddress,
      i.reason,
    ]),
  );
}

/** "Answered by <id> at <time>", and which instances did not answer; ends in a newline. */
export function header(s: FleetStatus | TenantStatus): string {
  const missing = s.instances.filter((i) => !i.answered).map((i) => i.id);
  const partial = missing.length > 0 ? `; PARTIAL: ${missing.join(", ")} did not answer` : "";
  return `Answered by ${cell(s.answeredBy)} at ${cell(s.generatedAt)}${cell(partial)}\n`;
}

export function renderFleet(s: FleetStatus): string {
  const window = s.tenants[0]?.recent.windowMinutes ?? 15;
  const tenants =
    s.tenants.length === 0
      ? "No tenant has agents or recent dials on the instances that answered.\n"
      : table(
          [
            "TENANT",
            "AGENTS",
            "INSTANCES",
            "TUNNELS",
            `DIALS (${window}m)`,
            `FAILURES (${window}m)`,
            "LAST ERROR",
          ],
          s.tenants.map((t) => [
            t.tenant,
            t.agents,
            t.instances.length > 0 ? t.instances.join(",") : null,
            t.openTunnels,
            total(t.recent),
            counts(t.recent.failures),
            t.lastError ? `${t.lastError.code ?? t.lastError.outcome} ${t.lastError.at}` : null,
          ]),
        );
  return `${header(s)}\nINSTANCES\n${instancesTable(s.instances)}\nTENANTS\n${tenants}`;
}

/** A tenant's agents, each on the instance holding its stream. */
export function agentsTable(t: TenantDetail): string {
  if (t.agents.length === 0) return "No agent connected to the instances that answered.\n";
  return table(
    [
      "AGENT",
      "INSTANCE",
      "REMOTE ADDRESS",
      "TRANSPORT",
      "VERSION",
      "CONNECTED SINCE",
      "LAST SEEN",
      "RESPONSIVE",
      "LOAD",
    ],
    t.agents.map((a) => [
      a.agentId,
      a.instance,
      a.remoteAddress,
      a.transport,
      a.agentVersion ?? "unknown",
      a.connectedSince,
      a.lastSeen,
      a.responsive ? "yes" : "no",
      a.load,
    ]),
  );
}

/** What a tenant's dials did: four lines, the last ending in a blank line. */
export function activityLines(t: TenantDetail): string[] {
  return [
    `RECENT DIALS (last ${t.recent.windowMinutes} minutes): ${cell(counts(t.recent.dials))}`,
    `FAILURES BY REASON: ${cell(counts(t.recent.failures))}`,
    `OPEN TUNNELS: ${t.openTunnels}`,
    `LAST ERROR: ${cell(lastError(t.lastError))}\n`,
  ];
}

export function renderTenant(s: TenantStatus): string {
  const t = s.tenant;
  const credentials =
    t.credentials.length === 0
      ? "No credential used on the instances that answered since they started.\n"
      : table(
          ["CREDENTIAL", "ROLE", "LAST USED"],
          t.credentials.map((c) => [c.id, c.role, c.lastUsed]),
        );
  return [
    `Tenant ${cell(t.tenant)}. ${header(s)}`,
    `AGENTS\n${agentsTable(t)}`,
    ...activityLines(t),
    `CREDENTIALS\n${credentials}`,
    `INSTANCES\n${instancesTable(s.instances)}`,
  ].join("\n");
}
