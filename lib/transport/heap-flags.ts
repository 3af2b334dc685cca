/**
 * V8 heap settings for the processes that move tunneled bytes (`kgw server`, `kgw agent`), set
 * from their entrypoints at start-up, so `node bin/kgw.js …`, `npx kgw …` and the image all run
 * with them (NODE_OPTIONS does not accept this flag, and an operator's own NODE_OPTIONS still
 * applies on top).
 *
 * Why: every socket read of a TLS connection arrives in a fresh 16 KiB buffer whose memory V8
 * counts as external. By default V8 gives external memory a limit of its own, low next to a
 * data path's allocation rate: a tunnel at 100–200 MB/s set off a mark-compact every 15 MB or
 * so moved (about 60 per GB, in the server and in the agent; 23–29% of their CPU), although
 * almost nothing in those buffers survives (a few MiB in flight at most). With external memory
 * accounted in V8's global limit, which grows with the heap like the old generation's, the
 * server's mark-compacts on an upload fell to about 20 per GB (docs/PERFORMANCE.md).
 *
 * The bound stays: external memory still triggers a full GC, at a limit V8 derives from what
 * survived the last one; what a tunnel holds in flight is bounded by its windows anyway.
 */
import { setFlagsFromString } from "node:v8";

/** Accounts external memory (ArrayBuffer contents) in V8's global allocation limit. */
export const EXTERNAL_MEMORY_IN_GLOBAL_LIMIT = "--external-memory-accounted-in-global-limit";

/**
 * The first V8 major version with that flag: Node 24 has 13.6. Node 20's 11.3 does not know it
 * (and would print "unrecognized flag"), so there nothing is set and V8 behaves as before.
 */
export const FIRST_V8_MAJOR_WITH_GLOBAL_EXTERNAL_LIMIT = 13;

export interface HeapFlagsDeps {
  /** `process.versions.v8`. */
  v8Version: string;
  setFlags: (flags: string) => void;
}

/** Sets the data path's heap flags this V8 has; returns the flags it set. */
export function setDataPathHeapFlags(
  deps: HeapFlagsDeps = { v8Version: process.versions.v8, setFlags: setFlagsFromString },
): string[] {
  const major = Number.parseInt(deps.v8Version, 10);
  if (!(major >= FIRST_V8_MAJOR_WITH_GLOBAL_EXTERNAL_LIMIT)) return [];
  deps.setFlags(EXTERNAL_MEMORY_IN_GLOBAL_LIMIT);
  return [EXTERNAL_MEMORY_IN_GLOBAL_LIMIT];
}
