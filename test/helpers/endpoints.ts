/**
 * What an operator reads from a running server or agent: its health and admin endpoints, and
 * the ports it announced in its --ports-file. Tests wait on these, never on log text.
 */
import { readFileSync } from "node:fs";

/** GET http://`hostPort``path`: the status and body, or status 0 when nothing answers. */
export async function httpGet(hostPort: string, path: string): Promise<{ status: number; body: string }> {
  try {
    const res = await fetch(`http://${hostPort}${path}`);
    return { status: res.status, body: await res.text() };
  } catch {
    return { status: 0, body: "" };
  }
}

/**
 * The value of one sample in a Prometheus text exposition: `name` with exactly `labels` (in the
 * order the exporter writes them), or 0 when absent, as a counter not yet incremented reads.
 */
export function sampleValue(exposition: string, name: string, labels: Record<string, string> = {}): number {
  const l = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .join(",");
  const prefix = l ? `${name}{${l}} ` : `${name} `;
  const line = exposition.split("\n").find((s) => s.startsWith(prefix));
  return line ? Number(line.slice(prefix.length)) : 0;
}

/** One sample from the /metrics of the admin endpoint at `hostPort` (0 when it does not answer). */
export async function metricAt(hostPort: string, name: string, labels: Record<string, string> = {}) {
  return sampleValue((await httpGet(hostPort, "/metrics")).body, name, labels);
}

/** The ports a `kgw server` or `kgw agent` wrote to its --ports-file, or null before it has. */
export function announcedPorts(file: string): Record<string, number> | null {
  try {
    return JSON.parse(readFileSync(file, "utf8")) as Record<string, number>;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
}
