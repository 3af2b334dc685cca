/**
 * Rounds: a scenario measures every system once per round, so that a change in the machine's
 * speed (other engineers' builds, a noisy neighbour) hits every system of a round alike, and
 * ratios are taken within a round. The other load of each round is recorded next to its figures.
 */
import { cpuSnapshot, otherLoad } from "./machine.js";
import type { BenchContext } from "./types.js";

/** Runs `body` once per round (ctx.options.rounds of them), recording each round's other load. */
export async function eachRound(ctx: BenchContext, body: (round: number) => Promise<void>): Promise<void> {
  const rounds = ctx.options.rounds;
  for (let round = 0; round < rounds; round++) {
    ctx.log(`  round ${round + 1}/${rounds}`);
    const before = cpuSnapshot();
    try {
      await body(round);
    } finally {
      const after = cpuSnapshot();
      const load = otherLoad(before, after);
      ctx.roundLoads.push({
        round: round + 1,
        seconds: (after.at - before.at) / 1000,
        otherCores: load.other,
        stealCores: load.steal,
      });
    }
  }
}

/**
 * The order in which a round visits its systems: as given in even rounds, reversed in odd ones,
 * so that no system always runs first, last, or right after the same other one.
 */
export function roundOrder<T>(items: readonly T[], round: number): T[] {
  return round % 2 === 0 ? [...items] : [...items].reverse();
}
