/** The `kgw` command as a user runs it. */

import { execFile } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import module from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EXIT } from "../../lib/commands/exit-codes.js";
import { PKI_SUBCOMMANDS } from "../../lib/commands/pki/parse-pki-command.js";
import { TENANT_SUBCOMMANDS } from "../../lib/commands/tenant/parse-tenant-command.js";
import { COMMANDS } from "../../services/kgw.js";
import { sourcesOf } from "../helpers/bundle-sources.js";
import { REPO, requireBuild, runKgwBin, runKgwOnTerminal } from "../helpers/kgw-bin.js";
import { spawnKgw } from "../helpers/kgw-process.js";

async function run(args: string[]): Promise<{ code: number | null; out: string }> {
  const p = spawnKgw(args);
  const { code } = await p.exited;
  return { code, out: p.output.join("") };
}

const VERSION = (JSON.parse(readFileSync(path.join(REPO, "package.json"), "utf8")) as { version: string })
  .version;

/** Handles alive in this process, by kind: every child and pipe a test opened must be gone. */
function resources(): Map<string, number> {
  const m = new Map<string, number>();
  for (const r of process.getActiveResourcesInfo()) m.set(r, (m.get(r) ?? 0) + 1);
  return m;
}
let baseline: Map<string, number>;

beforeAll(() => {
  requireBuild();
  baseline = resources();
});

afterAll(async () => {
  const leaked = () => [...resources()].filter(([k, n]) => n > (baseline.get(k) ?? 0));
  // A child's pipes close on its "close" event, a tick or so after the test saw it: poll briefly.
  for (let i = 0; i < 100 && leaked().length > 0; i++) await new Promise((r) => setTimeout(r, 20));
  expect(leaked()).toEqual([]);
});

describe("kgw", () => {
  it("demo --once shows a request going through the tunnel and exits 0", async () => {
    const { code, out } = await run(["demo", "--once", "--ephemeral-ports"]);
    expect(out).toMatch(/answer {2}: 200 hello from inside the cluster: you asked for GET \/demo/);
    expect(code).toBe(0);
  });

  it.each([
    ["server", "--graceful-shutdown-timeout"],
    ["agent", "--proxy-server-host"],
  ])("%s --help lists the upstream flag names", async (command, flag) => {
    const { code, out } = await run([command, "--help"]);
    expect(code).toBe(0);
    expect(out).toContain(flag);
  });

  it("rejects an unknown command and an unknown flag with exit code 2", async () => {
    expect((await run(["frobnicate"])).code).toBe(2);
    const bad = await run(["agent", "--no-such-flag"]);
    expect(bad.code).toBe(2);
    expect(bad.out).toContain("unknown flag --no-such-flag");
  });
});

describe("kgw --version", () => {
  it.each([["--version"], ["version"]])("%s prints package.json's version", async (flag) => {
    expect(await runKgwBin([flag])).toEqual({ code: 0, out: `kgw ${VERSION}\n`, err: "" });
  });

  it("version --json is machine-readable", async () => {
    const r = await runKgwBin(["version", "--json"]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out)).toEqual({ version: VERSION, node: process.version });
  });

  it("loads no command and no dependency", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "kgw-trace-"));
    const trace = path.join(dir, "modules.txt");
    // A resolve hook records every module the process loads (Node's module.register).
    const hooks = `import { appendFileSync } from "node:fs";
export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  appendFileSync(process.env.KGW_MODULE_TRACE, r.url + "\\n");
  return r;
}`;
    const register = `import { register } from "node:module"; register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(hooks)}`)});`;
    try {
      const r = await runKgwBin(["--version"], {
        nodeArgs: ["--import", `data:text/javascript,${encodeURIComponent(register)}`],
        env: { KGW_MODULE_TRACE: trace },
      });
      expect(r).toMatchObject({ code: 0, out: `kgw ${VERSION}\n` });
      // bin/kgw.js runs the bundle: the sources its loaded files hold (test/helpers/bundle-sources.ts).
      const ours = sourcesOf(readFileSync(trace, "utf8").split("\n"));
      expect(ours).toContain("services/kgw.ts");
      expect(ours.filter((f) => f.includes("node_modules"))).toEqual([]);
      expect(ours.filter((f) => f.includes("services/") && f !== "services/kgw.ts")).toEqual([]);
      expect(
        ours.filter((f) => /lib\/(commands\/(tenant|pki|demo)|server|agent|fleet|tenancy)\//.test(f)),
      ).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("Node's compile cache", () => {
  // Node ≥22.1 has one; on an older Node bin/kgw.js must run exactly as before.
  const hasCache = typeof (module as { enableCompileCache?: unknown }).enableCompileCache === "function";

  it("kgw fills it (in the OS temporary directory unless NODE_COMPILE_CACHE says where), and an older Node runs without it", async () => {
    // NODE_COMPILE_CACHE would make Node enable the cache by itself: the default place is asked for.
    const dir = await mkdtemp(path.join(tmpdir(), "kgw-compile-cache-"));
    const { NODE_COMPILE_CACHE: _set, ...env } = process.env;
    try {
      const out = await new Promise<string>((resolve, reject) =>
        execFile(
          process.execPath,
          [path.join(REPO, "bin", "kgw.js"), "--version"],
          { env: { ...env, TMPDIR: dir } },
          (err, stdout) => (err ? reject(err) : resolve(stdout)),
        ),
      );
      expect(out).toBe(`kgw ${VERSION}\n`);
      const cache = path.join(dir, "node-compile-cache");
      const entries = existsSync(cache)
        ? readdirSync(cache, { recursive: true, withFileTypes: true }).filter((e) => e.isFile())
        : [];
      if (hasCache) expect(entries.length).toBeGreaterThan(0);
      else expect(entries).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("kgw --help and kgw help", () => {
  it("kgw --help lists every command and every tenant and pki subcommand", async () => {
    const r = await runKgwBin(["--help"]);
    expect(r.code).toBe(0);
    for (const name of Object.keys(COMMANDS)) expect(r.out).toMatch(new RegExp(`^  ${name} `, "m"));
    for (const sub of [...TENANT_SUBCOMMANDS, ...PKI_SUBCOMMANDS]) expect(r.out).toContain(sub);
    expect(r.out).toContain(`subcommands: ${TENANT_SUBCOMMANDS.join(", ")}`);
    expect(r.out).toContain(`subcommands: ${PKI_SUBCOMMANDS.join(", ")}`);
  });

  it("kgw tenant --help lists all the tenant subcommands", async () => {
    const r = await runKgwBin(["tenant", "--help"]);
    expect(r.code).toBe(0);
    for (const sub of TENANT_SUBCOMMANDS) expect(r.out).toMatch(new RegExp(`^  ${sub} `, "m"));
  });

  it.each(Object.keys(COMMANDS).map((c) => [c]))("kgw help %s is its --help", async (command) => {
    const viaHelp = await runKgwBin(["help", command]);
    const viaFlag = await runKgwBin([command, "--help"]);
    expect(viaHelp.code).toBe(0);
    expect(viaHelp.out).toContain(`Usage: kgw ${command}`);
    expect(viaHelp).toEqual(viaFlag);
  });

  it.each([...TENANT_SUBCOMMANDS.map((s) => ["tenant", s]), ...PKI_SUBCOMMANDS.map((s) => ["pki", s])])(
    "kgw help %s %s is its --help",
    async (command, sub) => {
      const viaHelp = await runKgwBin(["help", command, sub]);
      const viaFlag = await runKgwBin([command, sub, "--help"]);
      expect(viaHelp.code).toBe(0);
      expect(viaHelp.out).toContain(`Usage: kgw ${command} ${sub} `);
      expect(viaHelp).toEqual(viaFlag);
    },
  );
});

describe("did you mean", () => {
  it.each([
    [["tenat", "list"], 'unknown command "tenat" (did you mean tenant?)'],
    [["help", "pkk"], 'unknown command "pkk" (did you mean pki?)'],
    [["tenant", "delet", "acme"], 'unknown subcommand "delet" (did you mean delete?)'],
    [["pki", "servng", "--out=x"], 'unknown subcommand "servng" (did you mean serving?)'],
    [
      ["server", "--graceful-shutdown-timout=1s"],
      "unknown flag --graceful-shutdown-timout (did you mean --graceful-shutdown-timeout?)",
    ],
    [["agent", "--proxy-server-prot=1"], "(did you mean --proxy-server-port?)"],
    [["tenant", "list", "--jsno"], "(did you mean --json?)"],
    [["demo", "--ephemeral-port"], "(did you mean --ephemeral-ports?)"],
  ])("kgw %j: exit 2, %s", async (args, hint) => {
    const r = await runKgwBin(args);
    expect(r.code).toBe(EXIT.USAGE);
    expect(r.err).toContain(hint);
    expect(r.out).toBe("");
  });

  it("suggests nothing far off", async () => {
    const r = await runKgwBin(["frobnicate"]);
    expect(r.code).toBe(EXIT.USAGE);
    expect(r.err).not.toContain("did you mean");
  });
});

describe("exit codes and confirmation of kgw tenant", () => {
  let root: string;
  let env: Record<string, string>;
  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), "kgw-cli-"));
    env = { KGW_TENANT_STORE_DIR: path.join(root, "store") };
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });
  const kgw = (...args: string[]) => runKgwBin(["tenant", ...args], { env });
  const stateOf = async (id: string) => {
    const r = await kgw("show", id, "--json");
    return r.code === 0
      ? (JSON.parse(r.out) as { tenant: { state: string } }).tenant.state
      : `exit ${r.code}`;
  };

  it("3 not found, 4 already so, 2 usage, as docs/CONFIGURATION.md lists them", async () => {
    const created = await kgw("create", "acme", "--bundle=false", "--json");
    expect(created.code).toBe(EXIT.OK);
    expect((await kgw("show", "nobody")).code).toBe(EXIT.NOT_FOUND);
    expect((await kgw("create", "acme", "--bundle=false")).code).toBe(EXIT.ALREADY);
    const tokenId = (JSON.parse(created.out) as { agentToken: string }).agentToken.split("_")[3]!;
    expect((await kgw("revoke", "acme", tokenId, "--yes")).code).toBe(EXIT.OK);
    const again = await kgw("revoke", "acme", tokenId, "--yes");
    expect(again.code).toBe(EXIT.ALREADY);
    expect(again.err).toContain("already revoked");
    expect((await kgw("revoke", "acme", "0123456789abcdef", "--yes")).code).toBe(EXIT.NOT_FOUND);
    expect((await kgw("revoke", "acme")).code).toBe(EXIT.USAGE);
  });

  it("delete with standard input not a terminal and no --yes refuses (5) and says why", async () => {
    expect((await kgw("create", "globex", "--bundle=false")).code).toBe(EXIT.OK);
    const r = await kgw("delete", "globex");
    expect(r.code).toBe(EXIT.NOT_CONFIRMED);
    expect(r.err).toContain("standard input is not a terminal");
    expect(r.err).toContain("pass --yes");
    expect(await stateOf("globex")).toBe("active");
    expect((await kgw("delete", "globex", "--yes")).code).toBe(EXIT.OK);
    expect(await stateOf("globex")).toBe("deleted");
  });

  it("delete on a terminal asks for the tenant's id and acts only on it", async () => {
    expect((await kgw("create", "initech", "--bundle=false")).code).toBe(EXIT.OK);
    const args = ["tenant", "delete", "initech", `--store-dir=${env.KGW_TENANT_STORE_DIR}`];
    const wrong = await runKgwOnTerminal(args, "Type initech to confirm:", "y", {});
    expect(wrong.asked).toBe(true);
    expect(wrong.code).toBe(EXIT.NOT_CONFIRMED);
    expect(await stateOf("initech")).toBe("active");
    const right = await runKgwOnTerminal(args, "Type initech to confirm:", "initech", {});
    expect(right.code).toBe(EXIT.OK);
    expect(right.out).toContain("Deleted tenant initech");
    expect(await stateOf("initech")).toBe("deleted");
  });

  it("revoke on a terminal asks y/N", async () => {
    const created = await kgw("create", "hooli", "--bundle=false", "--json");
    const tokenId = (JSON.parse(created.out) as { agentToken: string }).agentToken.split("_")[3]!;
    const args = ["tenant", "revoke", "hooli", tokenId, `--store-dir=${env.KGW_TENANT_STORE_DIR}`];
    const no = await runKgwOnTerminal(args, "Continue? [y/N]", "n", {});
    expect(no.code).toBe(EXIT.NOT_CONFIRMED);
    // Ctrl-C at the question declines too; it never leaves the command waiting.
    const interrupted = await runKgwOnTerminal(args, "Continue? [y/N]", "\u0003", {});
    expect(interrupted.code).toBe(EXIT.NOT_CONFIRMED);
    const yes = await runKgwOnTerminal(args, "Continue? [y/N]", "y", {});
    expect(yes.code).toBe(EXIT.OK);
    expect((await kgw("revoke", "hooli", tokenId, "--yes")).code).toBe(EXIT.ALREADY);
  });
});
