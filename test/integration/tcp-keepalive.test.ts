/**
 * Accepted connections carry TCP keepalive, so a load balancer in front (an NLB forgets a flow
 * idle for 350 s) keeps knowing an agent's connection however rarely the instance's paced
 * liveness PINGs reach it. What an operator would check on the host: `ss -o` shows a keepalive
 * timer on the server's side of an idle connection, and it is no longer than the documented
 * 60 s.
 */
import { execFileSync } from "node:child_process";
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../helpers/agent.js";
import { startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { activeResources, expectNoLeakedResources } from "../helpers/resources.js";

let t: TestGateway;
const sockets: Socket[] = [];
let baseline: Map<string, number>;

beforeAll(async () => {
  baseline = activeResources();
  t = await startTestGateway();
});

afterAll(async () => {
  for (const s of sockets) s.destroy();
  await t.gw.close();
  await expectNoLeakedResources(baseline);
});

/** An idle TCP connection to `port`, opened from the test; its local port. */
async function idleConnection(port: number): Promise<number> {
  const socket = connect({ host: "127.0.0.1", port });
  sockets.push(socket);
  socket.on("error", () => {});
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  return socket.localPort as number;
}

/** The timer `ss` reports for the server's end of the connection from `clientPort`. */
function serverSideTimer(serverPort: number, clientPort: number): string {
  const out = execFileSync(
    "ss",
    ["-tnoH", "state", "established", `( sport = :${serverPort} and dport = :${clientPort} )`],
    { encoding: "utf8" },
  );
  return /timer:\(([^)]*)\)/.exec(out)?.[1] ?? `no timer in: ${out.trim() || "(no socket)"}`;
}

/** Seconds left on a keepalive timer as `ss` prints it ("keepalive,59sec,0" or "keepalive,1min,0"). */
function keepaliveSeconds(timer: string): number {
  const m = /^keepalive,(?:(\d+)min)?(?:(\d+)sec)?(?:(\d+)ms)?,/.exec(timer);
  if (!m) return Number.NaN;
  return Number(m[1] ?? 0) * 60 + Number(m[2] ?? 0) + Number(m[3] ?? 0) / 1000;
}

describe("TCP keepalive on accepted connections", () => {
  for (const listener of ["agent", "frontend"] as const) {
    it(`is on for an idle connection to the ${listener} port, at most 60 s`, async () => {
      const port = t.gw.addresses[listener]!.port;
      const clientPort = await idleConnection(port);
      // The server's end exists once the kernel has accepted it; its options once Node has.
      let timer = "";
      await waitFor(() => {
        timer = serverSideTimer(port, clientPort);
        return timer.startsWith("keepalive,");
      }, 5_000).catch(() => {}); // the assertion below shows what ss printed instead
      expect(timer).toMatch(/^keepalive,/);
      const seconds = keepaliveSeconds(timer);
      expect(seconds).toBeGreaterThan(0);
      expect(seconds).toBeLessThanOrEqual(60);
    });
  }
});
