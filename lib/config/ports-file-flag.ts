import type { FlagSpec } from "./flags.js";

/**
 * `--ports-file`, for both `kgw server` and `kgw agent`: where to announce the ports actually
 * bound, so that whatever started the process with port 0 (a test, a local fleet, a sidecar)
 * learns them from a file meant for it rather than from a log line meant for people.
 * lib/observability/ports-file.ts writes it.
 */
export const PORTS_FILE_FLAG = {
  kind: "string",
  default: "",
  help: 'Once every listener is bound, write their ports to this file as one JSON object (e.g. {"agent":8132,"admin":8133,"health":8134}), replaced atomically; removed at start-up and on a clean exit. Off when empty.',
} as const satisfies FlagSpec;
