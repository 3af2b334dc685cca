/**
 * Loopback ports for programs that must be told a port number. Upstream proxy-server refuses
 * ports outside 1024–49151, and ports below the kernel's ephemeral range (32768+) are never handed
 * out to outgoing connections, so pick from 20000–32767 and check by binding. Shared with the
 * interop suite (test/interop), which starts the same upstream binaries.
 */
import { createServer } from "node:net";

export const LOOPBACK = "127.0.0.1";

const handedOut = new Set<number>();

function canBind(port: number): Promise<boolean> {
  const s = createServer();
  return new Promise((resolve) => {
    s.once("error", () => resolve(false));
    s.listen(port, LOOPBACK, () => s.close(() => resolve(true)));
  });
}

export async function freePort(): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const port = 20000 + Math.floor(Math.random() * 12768);
    if (handedOut.has(port)) continue;
    if (await canBind(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error("no free port found in 20000-32767");
}
