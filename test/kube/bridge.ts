/**
 * Runs inside the suite's network namespace: for each port given, a Unix socket
 * `<dir>/<port>.sock` whose connections are piped to 127.0.0.1:<port> in the namespace. Unix
 * sockets are not network-namespaced, so this is how the test process (outside) reaches the
 * kube-apiservers' secure ports and the servers' and agents' health and admin ports.
 *
 *   node --import tsx test/kube/bridge.ts <dir> <port>...
 *
 * Prints "bridge ready" once every socket listens; SIGTERM closes them (and removes the files).
 */
import { createServer, type Server, type Socket, connect as tcpConnect } from "node:net";
import path from "node:path";

const [dir, ...ports] = process.argv.slice(2);
if (!dir || ports.length === 0) throw new Error("usage: bridge.ts <dir> <port>...");

const sockets = new Set<Socket>();
const track = (s: Socket) => {
  sockets.add(s);
  s.on("close", () => sockets.delete(s));
};

function bridge(port: number): Promise<Server> {
  const server = createServer((inbound) => {
    const outbound = tcpConnect(port, "127.0.0.1");
    track(inbound);
    track(outbound);
    const destroyBoth = () => {
      inbound.destroy();
      outbound.destroy();
    };
    inbound.on("error", destroyBoth);
    outbound.on("error", destroyBoth);
    inbound.pipe(outbound);
    outbound.pipe(inbound);
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(path.join(dir!, `${port}.sock`), () => resolve(server));
  });
}

const servers = await Promise.all(ports.map((p) => bridge(Number(p))));
process.stdout.write("bridge ready\n");

process.once("SIGTERM", () => {
  for (const s of sockets) s.destroy();
  for (const s of servers) s.close();
});
