/**
 * A child process playing a kube-apiserver that is killed mid-download: dials <backend> through
 * the gRPC frontend at <frontend> (mTLS from <ca> <cert> <key>), asks the HTTP backend for a
 * large body, reads it, and tells its parent "receiving" once body bytes arrive.
 */
import { readFileSync } from "node:fs";
import { credentials } from "@grpc/grpc-js";
import { TunnelClient } from "../../lib/client/tunnel-client.js";

const [frontend, backend, ca, cert, key] = process.argv.slice(2) as [string, string, string, string, string];
const client = new TunnelClient(
  frontend,
  credentials.createSsl(readFileSync(ca), readFileSync(key), readFileSync(cert)),
  { "grpc.ssl_target_name_override": "localhost" },
);
const socket = await client.dial(backend);
socket.write(`GET /bytes?n=${1024 * 1024 * 1024} HTTP/1.1\r\nHost: backend\r\n\r\n`);
let told = false;
socket.on("data", () => {
  if (!told) process.send?.("receiving");
  told = true;
});
socket.on("error", () => process.exit(1));
