/**
 * Dial loops: each dials to the first byte (a PING answered through the tunnel) and closes,
 * alternately over HTTP CONNECT (a new mTLS connection per dial, as kube-apiserver makes) and
 * over gRPC (a new stream on a shared channel, renewed every few hundred dials), until stopped.
 */
import { connectOpener, DIAL_TIMEOUT_MS, grpcRotatingOpener, type Opener } from "../harness/paths.js";
import type { BenchPki } from "../harness/pki.js";
import { pause, withTimeout } from "../harness/util.js";
import { DIAL_PAUSE_MS, DIALERS } from "./options.js";
import type { Tally } from "./tally.js";

export async function runDialers(
  pki: BenchPki,
  frontendPort: number,
  target: string,
  tally: Tally,
  signal: AbortSignal,
): Promise<void> {
  const grpc = grpcRotatingOpener(pki, frontendPort, target);
  const openers: Opener[] = [connectOpener(pki, frontendPort, target), grpc.open];
  const loop = async (first: number) => {
    for (let i = first; !signal.aborted; i++) {
      const open = openers[i % openers.length]!;
      await tally.dial(async () => (await withTimeout(open(), DIAL_TIMEOUT_MS, "dial")).close());
      await pause(DIAL_PAUSE_MS, signal);
    }
  };
  try {
    await Promise.all(Array.from({ length: DIALERS }, (_, i) => loop(i)));
  } finally {
    grpc.close();
  }
}
