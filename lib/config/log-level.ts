/** --log-level, which `kgw server` and `kgw agent` share: pino's level names. */
import { ConfigError } from "../errors.js";
import type { FlagSpec } from "./flags.js";

export type LogLevel = "trace" | "debug" | "info" | "warn" | "error";
const LOG_LEVELS: readonly LogLevel[] = ["trace", "debug", "info", "warn", "error"];

export function parseLogLevel(v: string): LogLevel {
  if ((LOG_LEVELS as readonly string[]).includes(v)) return v as LogLevel;
  throw new ConfigError(`--log-level: "${v}" is not one of ${LOG_LEVELS.join(", ")}`);
}

/** The flag, the same for both commands. */
export const LOG_LEVEL_FLAG = {
  kind: "string",
  default: "info",
  help: "trace, debug, info, warn, error.",
  env: "KGW_LOG_LEVEL",
} as const satisfies FlagSpec;
