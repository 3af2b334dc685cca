/**
 * The first steps of a command with subcommands (`kgw tenant`, `kgw pki`): its flags parsed
 * from one table (lib/config/flags.ts), the subcommand named and known, `--help` answered. What
 * the subcommand takes and checks is the command's own.
 */

import { type FlagSpec, type ParsedFlags, parseFlags } from "../config/flags.js";
import { ConfigError } from "../errors.js";
import { didYouMean } from "../util/did-you-mean.js";

export type ParsedSubcommand<T extends Record<string, FlagSpec>, S extends string> =
  | { help: true; text: string }
  | { help: false; name: S; args: string[]; parsed: ParsedFlags<T> };

export function parseSubcommand<T extends Record<string, FlagSpec>, S extends string>(
  flags: T,
  subcommands: Readonly<Record<S, unknown>>,
  help: (sub?: S) => string,
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): ParsedSubcommand<T, S> {
  const parsed = parseFlags(flags, argv, env, { allowPositionals: true });
  const [first, ...rest] = parsed.positionals;
  if (first === undefined) return { help: true, text: help() };
  // `kgw tenant help delete` is `kgw tenant delete --help`, as `kgw help tenant` is `kgw tenant --help`.
  const asksHelp = first === "help";
  const sub = asksHelp ? rest[0] : first;
  const args = asksHelp ? rest.slice(1) : rest;
  if (sub === undefined) return { help: true, text: help() };
  const known = Object.keys(subcommands);
  if (!Object.hasOwn(subcommands, sub)) {
    throw new ConfigError(
      `unknown subcommand "${sub.slice(0, 40)}"${didYouMean(sub, known)} (one of ${known.join(", ")})`,
    );
  }
  const name = sub as S;
  if (asksHelp) return { help: true, text: help(name) };
  if (parsed.help) return { help: true, text: help(name) };
  return { help: false, name, args, parsed };
}
