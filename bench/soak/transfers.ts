/**
 * Transfer loops: each moves TRANSFER_BYTES to or from the backend through a tunnel of its own,
 * every byte checked at the receiving end, cycling through CONNECT and gRPC, download and upload.
 */
import { connectOpener, grpcOwnChannelOpener, type Opener } from "../harness/paths.js";
import type { BenchPki } from "../harness/pki.js";
import { bulk, type Direction } from "../harness/transfer.js";
import { pause } from "../harness/util.js";
import { TRANSFER_BYTES, TRANSFER_LOOPS, TRANSFER_MAX_MS, TRANSFER_PAUSE_MS } from "./options.js";
import type { Tally } from "./tally.js";

export async function runTransfers(
  pki: BenchPki,
  frontendPort: number,
  target: string,
  tally: Tally,
  signal: AbortSignal,
): Promise<void> {
  const kinds: { open: Opener; dir: Direction }[] = [];
  for (const open of [
    connectOpener(pki, frontendPort, target),
    grpcOwnChannelOpener(pki, frontendPort, target),
  ]) {
    for (const dir of ["download", "upload"] as const) kinds.push({ open, dir });
  }
  const loop = async (first: number) => {
    for (let i = first; !signal.aborted; i++) {
      const { open, dir } = kinds[i % kinds.length]!;
      await tally.transfer(async () => {
        const t = await bulk(open, dir, TRANSFER_BYTES, TRANSFER_MAX_MS);
        if (t.bytes < TRANSFER_BYTES) {
          throw new Error(`${dir}: ${t.bytes} of ${TRANSFER_BYTES} bytes within ${TRANSFER_MAX_MS} ms`);
        }
        return t.bytes;
      });
      await pause(TRANSFER_PAUSE_MS, signal);
    }
  };
  await Promise.all(Array.from({ length: TRANSFER_LOOPS }, (_, i) => loop(i)));
}
