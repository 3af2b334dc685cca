/** Command-line options of `npm run bench`. */
import type { BenchOptions, Sizes } from "./types.js";

/** Rounds by default: at least three, so that a median and a range mean something. */
export const DEFAULT_ROUNDS = 3;
/** --quick checks the harness, not figures: one round. */
const QUICK_ROUNDS = 1;

export const USAGE = `Usage: npm run bench -- [options]

  --quick               tiny sizes (seconds, not minutes): the smoke test's mode
  --only <a,b>          run only these scenarios (see --list); repeatable
  --rounds <n>          measure every system n times, interleaved
                        (default ${DEFAULT_ROUNDS}; ${QUICK_ROUNDS} with --quick)
  --out-dir <dir>       where child processes write their output (default: a new directory in tmpdir)
  --upstream=auto|on|off
                        the upstream column: auto = when \`go\` is on the PATH (default)
  --tenant-mode         also measure kgw in tenant mode (one tenant, callers on the agent port)
                        in throughput and dial, in the same rounds, with its ratio to kgw
                        (fairness runs in tenant mode always, with or without it)
  --json <file>         also write the results as JSON
  --markdown            print the tables as Markdown (for docs/PERFORMANCE.md)
  --render <file>       print the tables of an earlier --json file and exit
  --no-build            use dist/ as it is (default: \`npm run build\` when sources are newer)
  --profile <dir>       write CPU profiles of the kgw server and agent processes into <dir>
  --transfers <regexp>  throughput and wan: measure only the transfers whose key matches, e.g.
                        '^go-kgw-upload$' (keys: [curl-|go-|go32k-]<path>-<direction>), to
                        profile one of them; the other rows read "not measured"
  --list                list the scenarios and exit
  --help
`;

export function parseArgs(argv: readonly string[]): BenchOptions | "help" {
  let rounds: number | undefined;
  const o: BenchOptions = {
    quick: false,
    rounds: DEFAULT_ROUNDS,
    only: [],
    upstream: "auto",
    tenantMode: false,
    markdown: false,
    build: true,
    list: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const eq = arg.indexOf("=");
    const name = eq > 0 ? arg.slice(0, eq) : arg;
    const inline = eq > 0 ? arg.slice(eq + 1) : undefined;
    const takeValue = (): string => {
      if (inline !== undefined) return inline;
      const next = argv[++i];
      if (next === undefined) throw new Error(`${name} needs a value`);
      return next;
    };
    switch (name) {
      case "--quick":
        o.quick = true;
        break;
      case "--only":
        o.only.push(
          ...takeValue()
            .split(",")
            .map((s) => s.trim())
            .filter(Boolean),
        );
        break;
      case "--upstream": {
        const v = takeValue();
        if (v !== "auto" && v !== "on" && v !== "off") throw new Error(`--upstream must be auto, on or off`);
        o.upstream = v;
        break;
      }
      case "--tenant-mode":
        o.tenantMode = true;
        break;
      case "--rounds": {
        const v = takeValue();
        rounds = Number(v);
        if (!Number.isInteger(rounds) || rounds < 1)
          throw new Error(`--rounds must be a positive integer, not ${v}`);
        break;
      }
      case "--out-dir":
        o.outDir = takeValue();
        break;
      case "--json":
        o.json = takeValue();
        break;
      case "--markdown":
        o.markdown = true;
        break;
      case "--render":
        o.render = takeValue();
        break;
      case "--no-build":
        o.build = false;
        break;
      case "--profile":
        o.profileDir = takeValue();
        break;
      case "--transfers": {
        const v = takeValue();
        try {
          o.transfers = new RegExp(v);
        } catch (err) {
          throw new Error(`--transfers must be a regular expression: ${(err as Error).message}`);
        }
        break;
      }
      case "--list":
        o.list = true;
        break;
      case "--help":
      case "-h":
        return "help";
      default:
        throw new Error(`unknown option ${arg}`);
    }
  }
  o.rounds = rounds ?? (o.quick ? QUICK_ROUNDS : DEFAULT_ROUNDS);
  return o;
}

export function sizesFor(quick: boolean): Sizes {
  return quick
    ? {
        bulkBytes: 2 * 1024 * 1024,
        bulkMaxMs: 300,
        latencyDials: 20,
        dialRateMs: 300,
        dialConcurrency: 8,
        memoryCounts: [10, 40],
        holWindowMs: 300,
        warmupMs: 100,
        warmupDials: 5,
        pings: 10,
        settleMs: 200,
        fairnessDialMs: 300,
      }
    : {
        bulkBytes: 512 * 1024 * 1024,
        bulkMaxMs: 2000,
        latencyDials: 1000,
        dialRateMs: 5000,
        dialConcurrency: 64,
        memoryCounts: [1000, 10_000],
        holWindowMs: 2000,
        warmupMs: 1000,
        warmupDials: 50,
        pings: 100,
        settleMs: 2000,
        fairnessDialMs: 3000,
      };
}
