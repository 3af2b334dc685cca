/**
 * A child process for tests that kill or freeze an HTTP/2 peer mid-transfer: connects to
 * https://127.0.0.1:<port> (trusting <ca file>), asks for "/" and reads what comes, and tells
 * its parent "receiving" once bytes arrive. Its windows are as large as gRPC clients' (16 MiB),
 * so the server has plenty in flight towards it.
 */
import { readFileSync } from "node:fs";
import { connect } from "node:http2";

const [port, caFile] = process.argv.slice(2);
const WINDOW = 16 * 1024 * 1024;
const session = connect(`https://localhost:${port}`, {
  ca: readFileSync(caFile!),
  settings: { initialWindowSize: WINDOW },
});
session.once("connect", () => session.setLocalWindowSize(WINDOW));
session.on("error", () => process.exit(1));
const stream = session.request({ ":path": "/" });
stream.once("data", () => process.send?.("receiving"));
stream.on("data", () => {});
stream.on("error", () => process.exit(1));
