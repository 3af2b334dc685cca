/**
 * A small, strict command-line flag parser in the style of Go's pflag, which upstream uses:
 * `--name=value`, `--name value`, bare `--bool` / `--bool=false`. Unknown flags, missing values
 * and malformed numbers are configuration errors reported in one line.
 *
 * Flags are declared as data (name, kind, default, help, optional env var) so that parsing,
 * defaults and `--help` text come from one table.
 */
import { ConfigError } from "../errors.js";
import { didYouMean } from "../util/did-you-mean.js";
import { formatDuration, parseDuration } from "./duration.js";

export type FlagKind = "string" | "int" | "bool" | "duration" | "port";

export interface FlagSpec {
  kind: FlagKind;
  default: string | number | boolean;
  help: string;
  /** Environment variable consulted when the flag is not given on the command line. */
  env?: string;
}

type ValueOf<K extends FlagKind> = K extends "bool" ? boolean : K extends "string" ? string : number;

export type FlagValues<T extends Record<string, FlagSpec>> = { [P in keyof T]: ValueOf<T[P]["kind"]> };

export const defineFlags = <const T extends Record<string, FlagSpec>>(specs: T): T => specs;

function convert(name: string, spec: FlagSpec, raw: string): string | number | boolean {
  switch (spec.kind) {
    case "string":
      return raw;
    case "bool":
      if (raw === "true" || raw === "1") return true;
      if (raw === "false" || raw === "0") return false;
      throw new ConfigError(`--${name}: expected true or false, got "${raw}"`);
    case "duration":
      return parseDuration(raw, `--${name}`);
    case "int":
    case "port": {
      if (!/^-?\d+$/.test(raw)) throw new ConfigError(`--${name}: expected an integer, got "${raw}"`);
      const n = Number(raw);
      if (!Number.isSafeInteger(n)) throw new ConfigError(`--${name}: ${raw} is out of range`);
      if (spec.kind === "port" && (n < 0 || n > 65535)) {
        throw new ConfigError(`--${name}: port ${n} is outside 0-65535`);
      }
      return n;
    }
  }
}

export interface ParsedFlags<T extends Record<string, FlagSpec>> {
  values: FlagValues<T>;
  /** Names of flags the user set explicitly (command line or environment). */
  explicit: Set<keyof T & string>;
  /** Names of flags given on the command line (not from the environment). */
  onCommandLine: Set<keyof T & string>;
  /** Arguments that are not flags, in order; always empty unless `allowPositionals`. */
  positionals: string[];
  help: boolean;
}

export interface ParseFlagsOptions {
  /** Accept arguments that are not flags (subcommands, names) instead of refusing them. */
  allowPositionals?: boolean;
}

export function parseFlags<T extends Record<string, FlagSpec>>(
  specs: T,
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>> = {},
  options: ParseFlagsOptions = {},
): ParsedFlags<T> {
  const values: Record<string, string | number | boolean> = {};
  const explicit = new Set<string>();
  const positionals: string[] = [];
  let help = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "--help" || arg === "-h") {
      help = true;
      continue;
    }
    if (!arg.startsWith("--") && options.allowPositionals) {
      positionals.push(arg);
      continue;
    }
    if (!arg.startsWith("--")) throw new ConfigError(`unexpected argument "${arg}"`);
    const eq = arg.indexOf("=");
    const name = arg.slice(2, eq === -1 ? undefined : eq);
    const spec = Object.hasOwn(specs, name) ? specs[name] : undefined;
    if (!spec) throw new ConfigError(unknownFlag(name, specs));
    let raw: string;
    if (eq !== -1) raw = arg.slice(eq + 1);
    else if (spec.kind === "bool") raw = "true";
    else {
      const next = argv[i + 1];
      if (next === undefined) throw new ConfigError(`--${name} needs a value`);
      raw = next;
      i++;
    }
    values[name] = convert(name, spec, raw);
    explicit.add(name);
  }
  const onCommandLine = new Set(explicit);
  for (const [name, spec] of Object.entries(specs)) {
    if (name in values) continue;
    const fromEnv = spec.env ? env[spec.env] : undefined;
    if (fromEnv !== undefined && fromEnv !== "") {
      values[name] = convert(name, spec, fromEnv);
      explicit.add(name);
    } else {
      values[name] = spec.default;
    }
  }
  return {
    values: values as FlagValues<T>,
    explicit: explicit as Set<keyof T & string>,
    onCommandLine: onCommandLine as Set<keyof T & string>,
    positionals,
    help,
  };
}

/**
 * The error line for a flag nobody declared: the name as typed (bounded: it is the user's input,
 * maybe pasted garbage), the closest declared flag if one is close, and where to look.
 */
function unknownFlag(name: string, specs: Record<string, FlagSpec>): string {
  const shown = name.length > MAX_SHOWN_FLAG ? `${name.slice(0, MAX_SHOWN_FLAG)}…` : name;
  const known = [...Object.keys(specs), "help"];
  return `unknown flag --${shown}${didYouMean(name, known, "--")} (see --help)`;
}

/** A flag name is at most about 30 letters; more than this is shown cut (a pasted token, say). */
const MAX_SHOWN_FLAG = 60;

export function formatHelp(usage: string, summary: string, specs: Record<string, FlagSpec>): string {
  const rows = Object.entries(specs).map(([name, spec]) => {
    const left = `  --${name}${spec.kind === "bool" ? "" : ` ${spec.kind}`}`;
    const def =
      spec.kind === "duration"
        ? formatDuration(spec.default as number)
        : spec.default === ""
          ? ""
          : String(spec.default);
    const env = spec.env ? ` [$${spec.env}]` : "";
    return `${left.padEnd(40)} ${spec.help}${def ? ` (default ${def})` : ""}${env}`;
  });
  return `Usage: ${usage}\n\n${summary}\n\nFlags:\n${rows.join("\n")}\n${"  --help".padEnd(40)} Show this help.\n`;
}
