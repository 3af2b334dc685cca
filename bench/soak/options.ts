/**
 * `npm run soak` options, and the load's shape: every pace and bound, with why it is what it is.
 * The load is meant to run for half an hour on two shared cores, so it is paced well below what
 * the machine can do: the soak looks for growth over time, not for speed.
 */

export const DEFAULT_MINUTES = 30;
/** How often the server's memory and descriptors are read (and the table gets a row). */
export const SAMPLE_EVERY_MS = 60_000;
/** Growth is reported from this minute on: the first minutes fill caches, pools and JIT code. */
export const BASELINE_MINUTE = 2;

/** Dial loops, each dialing to the first byte and closing, alternately CONNECT and gRPC. */
export const DIALERS = 4;
/** Between two dials of one loop: about 30 dials/s in all, a fifth of what CONNECT reaches here. */
export const DIAL_PAUSE_MS = 100;

/** Transfer loops, each moving TRANSFER_BYTES one way, then the other, every byte checked. */
export const TRANSFER_LOOPS = 2;
export const TRANSFER_BYTES = 16 * 1024 * 1024;
/** A transfer slower than this fails (16 MiB takes well under a second when nothing is wrong). */
export const TRANSFER_MAX_MS = 20_000;
export const TRANSFER_PAUSE_MS = 500;

/** Two agents: while one restarts, the other carries the dials, as in a real deployment. */
export const AGENTS = 2;
/**
 * One agent restart this often, the agents in turn, each alternating between a graceful stop
 * (SIGTERM) and a crash (SIGKILL).
 */
export const AGENT_RESTART_EVERY_MS = 45_000;
/** A draining agent waits for its open tunnels; transfers take seconds, so this is plenty. */
export const AGENT_DRAIN_GRACE_MS = 30_000;

/**
 * Slow TLS handshakes: connections that open TCP and then send nothing, or one byte of a
 * ClientHello every SLOW_BYTE_EVERY_MS. SLOW_PER_SOURCE per source address and listener (the
 * frontend and the agent port), from SLOW_SOURCES: loopback addresses other than the one the
 * legitimate dials come from, so that a cap per source address the server applies to them never
 * applies to the dials. Bounded: at most 2 × 2 × 8 = 32 at a time.
 */
export const SLOW_SOURCES = ["127.0.0.2", "127.0.0.3"];
export const SLOW_PER_SOURCE = 8;
export const SLOW_BYTE_EVERY_MS = 3_000;
/** After the server closed one, wait this long before opening the next in its place. */
export const SLOW_REOPEN_MS = 1_000;

/**
 * Listeners the load puts on its stop signal at most: each loop, each slow connection, and a pause
 * in each of those.
 */
export const STOP_LISTENERS = 2 * (DIALERS + TRANSFER_LOOPS + 1 + 2 * SLOW_SOURCES.length * SLOW_PER_SOURCE);

/** After the load stopped: how long the server may take to close everything it held. */
export const DRAIN_AFTER_LOAD_MS = 15_000;

export const USAGE = `Usage: npm run soak -- [options]

  --minutes <n>     how long the load runs (default ${DEFAULT_MINUTES})
  --json <file>     where to write the samples as JSON (default: soak.json in the output directory)
  --out-dir <dir>   where child processes write their output (default: a new directory in tmpdir)
  --no-build        use dist/ as it is (default: \`npm run build\` when sources are newer)
  --help
`;

export interface SoakOptions {
  minutes: number;
  json?: string;
  outDir?: string;
  build: boolean;
}

export function parseSoakArgs(argv: readonly string[]): SoakOptions | "help" {
  const o: SoakOptions = { minutes: DEFAULT_MINUTES, build: true };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const eq = arg.indexOf("=");
    const name = eq > 0 ? arg.slice(0, eq) : arg;
    const takeValue = (): string => {
      if (eq > 0) return arg.slice(eq + 1);
      const next = argv[++i];
      if (next === undefined) throw new Error(`${name} needs a value`);
      return next;
    };
    switch (name) {
      case "--minutes": {
        const v = takeValue();
        o.minutes = Number(v);
        if (!Number.isInteger(o.minutes) || o.minutes < 1)
          throw new Error(`--minutes must be a positive integer, not ${v}`);
        break;
      }
      case "--json":
        o.json = takeValue();
        break;
      case "--out-dir":
        o.outDir = takeValue();
        break;
      case "--no-build":
        o.build = false;
        break;
      case "--help":
      case "-h":
        return "help";
      default:
        throw new Error(`unknown option ${arg}`);
    }
  }
  return o;
}
