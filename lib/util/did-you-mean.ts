/**
 * "Did you mean": the known name closest to a mistyped one, for unknown commands, subcommands
 * and flags. Only a close name is suggested: a suggestion that is far off misleads more than it
 * helps, so anything further than about a third of the word's length is no suggestion at all.
 */

/** Names longer than this are not compared: the input is someone's mistake, not a name of ours. */
const MAX_COMPARED_LENGTH = 64;

/**
 * The edit distance of two strings where swapping two neighbouring letters is one edit
 * (optimal string alignment), the commonest typo ("tenatn").
 */
export function editDistance(a: string, b: string): number {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const d: number[] = new Array(rows * cols).fill(0);
  for (let i = 0; i < rows; i++) d[i * cols] = i;
  for (let j = 0; j < cols; j++) d[j] = j;
  for (let i = 1; i < rows; i++) {
    for (let j = 1; j < cols; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(
        d[(i - 1) * cols + j]! + 1,
        d[i * cols + j - 1]! + 1,
        d[(i - 1) * cols + j - 1]! + cost,
      );
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        best = Math.min(best, d[(i - 2) * cols + j - 2]! + 1);
      }
      d[i * cols + j] = best;
    }
  }
  return d[rows * cols - 1]!;
}

/** How many edits still count as a typo of a name this long: 1 up to 5 letters, then a third. */
function tolerance(length: number): number {
  return Math.max(1, Math.floor(length / 3));
}

/**
 * The known name closest to `input`, if it is close enough to be a typo (ties: the first in
 * `known`'s order); a name that starts with the input (an abbreviation, "ten") counts too.
 */
export function closestName(input: string, known: Iterable<string>): string | undefined {
  if (input.length === 0 || input.length > MAX_COMPARED_LENGTH) return undefined;
  const typed = input.toLowerCase();
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const name of known) {
    if (name.length > MAX_COMPARED_LENGTH) continue;
    const distance = editDistance(typed, name.toLowerCase());
    if (distance < bestDistance) {
      best = name;
      bestDistance = distance;
    }
  }
  if (best !== undefined && bestDistance <= tolerance(Math.max(typed.length, best.length))) return best;
  if (typed.length >= 3) {
    const prefixed = [...known].filter((n) => n.toLowerCase().startsWith(typed));
    if (prefixed.length === 1) return prefixed[0];
  }
  return undefined;
}

/** ` (did you mean tenant?)`, or "" when nothing is close; `prefix` goes before the name ("--"). */
export function didYouMean(input: string, known: Iterable<string>, prefix = ""): string {
  const name = closestName(input, known);
  return name === undefined ? "" : ` (did you mean ${prefix}${name}?)`;
}
