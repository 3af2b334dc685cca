import { pino } from "pino";

export type Logger = pino.Logger;

/**
 * Paths pino blanks out wherever they appear in a log record. Tokens and credentials must never
 * reach logs, even when a whole request or metadata object is logged by mistake.
 */
export const REDACT_PATHS = [
  "token",
  "tokens",
  "authorization",
  "password",
  "*.token",
  "*.tokens",
  "*.authorization",
  "*.password",
  "*.privateKey",
  'headers["proxy-authorization"]',
  "headers.authorization",
  "metadata.authorization",
];

export interface LoggerOptions {
  level: string;
  name: string;
  /** Where JSON lines go; stdout (fd 1) by default. Tests pass a stream to inspect output. */
  destination?: pino.DestinationStream;
}

export function createLogger(opts: LoggerOptions): Logger {
  return pino(
    {
      name: opts.name,
      level: opts.level,
      redact: { paths: REDACT_PATHS, censor: "[REDACTED]" },
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      serializers: { err: pino.stdSerializers.err },
    },
    opts.destination ?? pino.destination({ fd: 1, sync: false }),
  );
}

/** A logger that drops everything; for library callers that pass none. */
export const silentLogger = (): Logger => pino({ level: "silent" });
