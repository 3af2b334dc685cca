/**
 * kgw's figure over a baseline's, and kgw in tenant mode's over kgw's. Taken round by round when
 * both cells were measured in the same rounds (both systems then ran minutes apart on the same
 * machine state), and summarized as the median and range of those per-round ratios; otherwise
 * the ratio of the two figures.
 */
import { type Spread, spread } from "./stats.js";
import type { Cell, Row, System } from "./types.js";

function perRound(a: Cell | undefined, b: Cell | undefined): number[] | undefined {
  const ra = a?.rounds;
  const rb = b?.rounds;
  if (!ra || !rb || ra.length !== rb.length || ra.length === 0) return undefined;
  const ratios = ra.map((v, i) => v / rb[i]!);
  return ratios.every(Number.isFinite) ? ratios : undefined;
}

/** `num` / `den` for `row`, or undefined when a figure is missing or the denominator is 0. */
export function ratio(row: Row, num: System, den: System): Spread | undefined {
  const a = row.cells[num];
  const b = row.cells[den];
  const rounds = perRound(a, b);
  if (rounds) return spread(rounds);
  const r = (a?.value ?? Number.NaN) / (b?.value ?? Number.NaN);
  return Number.isFinite(r) ? spread([r]) : undefined;
}

/** kgw / `other` for `row`, or undefined when a figure is missing or the baseline is 0. */
export function kgwRatio(row: Row, other: System): Spread | undefined {
  return ratio(row, "kgw", other);
}
