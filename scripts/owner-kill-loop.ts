/**
 * The stress run behind issue 22's item 1, outside CI: kills a tenant's owner instance (kill -9)
 * hundreds of times while callers at another instance download through it over a peer link, and
 * counts how each caller saw its tunnel end. A broken tunnel must read as an error to every
 * caller; a clean end ("end" below) is a truncated transfer taken for a whole one.
 * Loopback only; bounded by --kills and --minutes, whichever comes first.
 *
 *   node --import tsx scripts/owner-kill-loop.ts                    # 200 kills × 10 transfers
 *   node --import tsx scripts/owner-kill-loop.ts --kills=50 --connect=8 --paused=2 --grpc=2 --minutes=10
 *
 * Exits 1 when any transfer ended cleanly or hung. The loop is test/helpers/owner-kill-loop.ts;
 * its CI-sized run is test/system/peer-hop-truncation.test.ts.
 */
import { cleanEnds, runOwnerKillLoop, summarize } from "../test/helpers/owner-kill-loop.js";

function flag(name: string, fallback: number): number {
  const arg = process.argv.find((a) => a.startsWith(`--${name}=`));
  const value = arg === undefined ? fallback : Number(arg.slice(name.length + 3));
  if (!Number.isInteger(value) || value < 0) throw new Error(`--${name} must be a whole number`);
  return value;
}

const kills = flag("kills", 200);
const connect = flag("connect", 8);
const paused = flag("paused", 0);
const grpc = flag("grpc", 2);
const minutes = flag("minutes", 30);
if (paused > connect) throw new Error("--paused cannot exceed --connect");

const startedAt = Date.now();
const result = await runOwnerKillLoop({
  kills,
  connectCallers: connect,
  pausedCallers: paused,
  grpcCallers: grpc,
  budgetMs: minutes * 60_000,
  onRound: (round, ends) => {
    const clean = cleanEnds(ends);
    const hung = ends.filter((e) => e.how === "hung").length;
    const note = clean.map((e) => `${e.frontend} at ${e.bytes} B, ${e.msAfterKill} ms after the kill`);
    process.stderr.write(
      `[owner-kill-loop] kill ${round + 1}: ${ends.length} transfers, ${clean.length} clean ends, ${hung} hung${note.length ? ` (${note.join("; ")})` : ""}\n`,
    );
  },
});
const clean = cleanEnds(result.transfers);
const hung = result.transfers.filter((t) => t.how === "hung");
process.stdout.write(
  [
    `owner-kill-loop: ${result.kills} kills × ${connect + grpc} transfers (${connect} CONNECT, ${paused} of them paused; ${grpc} gRPC) = ${result.transfers.length} transfers in ${((Date.now() - startedAt) / 1000).toFixed(0)} s`,
    `clean ends (broken tunnels read as complete): ${clean.length}; hung: ${hung.length}`,
    ...summarize(result.transfers).map((l) => `  ${l}`),
    "",
  ].join("\n"),
);
process.exit(clean.length > 0 || hung.length > 0 ? 1 : 0);
