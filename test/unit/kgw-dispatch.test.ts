/**
 * The `kgw` dispatcher: its help lists every command of the table in services/kgw.ts and every
 * subcommand of their own tables (never a hand-written list), `help <command>` is the command's
 * --help, the version is package.json's, and an unknown command names the closest one.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { type CommandTable, dispatch, usage } from "../../lib/commands/dispatch.js";
import { EXIT } from "../../lib/commands/exit-codes.js";
import { PKI_SUBCOMMANDS } from "../../lib/commands/pki/parse-pki-command.js";
import { TENANT_SUBCOMMANDS, tenantHelp } from "../../lib/commands/tenant/parse-tenant-command.js";
import { packageVersion } from "../../lib/commands/version.js";
import { COMMANDS } from "../../services/kgw.js";

const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
  version: string;
};

/** A table whose commands record how they were called instead of running. */
function recordingTable(): { table: CommandTable; calls: [string, string[]][] } {
  const calls: [string, string[]][] = [];
  const entry = (name: string) => ({
    summary: `the ${name} command`,
    load: async () => ({
      main: async (argv: string[]) => {
        calls.push([name, argv]);
        return 0;
      },
    }),
  });
  return { table: { server: entry("server"), tenant: entry("tenant") }, calls };
}

async function run(table: CommandTable, ...argv: string[]) {
  let out = "";
  let err = "";
  const code = await dispatch(
    table,
    argv,
    {},
    {
      out: (t) => {
        out += t;
      },
      err: (t) => {
        err += t;
      },
      version: () => "9.8.7",
    },
  );
  return { code, out, err };
}

describe("kgw --help", () => {
  it("lists every command of the table and every tenant and pki subcommand", async () => {
    const text = await usage(COMMANDS);
    for (const name of Object.keys(COMMANDS)) expect(text).toMatch(new RegExp(`^  ${name} `, "m"));
    const listed = (command: string) => {
      const line = text.split("\n").findIndex((l) => l.startsWith(`  ${command} `));
      return text
        .split("\n")
        [line + 1]!.replace(/^\s+subcommands: /, "")
        .split(", ");
    };
    expect(listed("tenant")).toEqual([...TENANT_SUBCOMMANDS]);
    expect(listed("pki")).toEqual([...PKI_SUBCOMMANDS]);
    expect(TENANT_SUBCOMMANDS.length).toBe(11);
    expect(text).toContain("  help ");
    expect(text).toContain("  version ");
  });

  it("kgw tenant --help lists every tenant subcommand with its summary", () => {
    const text = tenantHelp();
    for (const sub of TENANT_SUBCOMMANDS) expect(text).toMatch(new RegExp(`^  ${sub} `, "m"));
  });

  it("goes to stdout with 0 when asked for, to stderr with 2 when no command is given", async () => {
    const { table } = recordingTable();
    expect(await run(table, "--help")).toMatchObject({ code: EXIT.OK, err: "" });
    const bare = await run(table);
    expect(bare).toMatchObject({ code: EXIT.USAGE, out: "" });
    expect(bare.err).toContain("Usage: kgw <command>");
  });
});

describe("kgw help <command>", () => {
  it("is the command's own --help, for a subcommand too", async () => {
    const { table, calls } = recordingTable();
    expect((await run(table, "help", "tenant")).code).toBe(0);
    expect((await run(table, "help", "tenant", "delete")).code).toBe(0);
    expect(calls).toEqual([
      ["tenant", ["--help"]],
      ["tenant", ["delete", "--help"]],
    ]);
  });

  it("names the closest command when the one asked for is unknown", async () => {
    const { table, calls } = recordingTable();
    const r = await run(table, "help", "tenat");
    expect(r).toMatchObject({ code: EXIT.USAGE, out: "" });
    expect(r.err).toContain('unknown command "tenat" (did you mean tenant?)');
    expect(calls).toEqual([]);
  });
});

describe("unknown commands", () => {
  it.each([
    ["tenat", "(did you mean tenant?)"],
    ["sever", "(did you mean server?)"],
    ["hlep", "(did you mean help?)"],
    ["--verison", "(did you mean --version?)"],
  ])("%s: exit 2, %s", async (typed, hint) => {
    const { table, calls } = recordingTable();
    const r = await run(table, typed, "x");
    expect(r.code).toBe(EXIT.USAGE);
    expect(r.err).toContain(hint);
    expect(calls).toEqual([]);
  });

  it("suggests nothing when nothing is close, and bounds what it repeats", async () => {
    const { table } = recordingTable();
    const far = await run(table, "frobnicate");
    expect(far.err).toContain('unknown command "frobnicate"');
    expect(far.err).not.toContain("did you mean");
    expect((await run(table, "z".repeat(100_000))).err.length).toBeLessThan(200);
  });

  it("hands the rest of the line to the command", async () => {
    const { table, calls } = recordingTable();
    await run(table, "tenant", "list", "--json");
    expect(calls).toEqual([["tenant", ["list", "--json"]]]);
  });
});

describe("kgw --version", () => {
  it("is package.json's version, found from the sources and from dist/", () => {
    expect(packageVersion()).toBe(pkg.version);
    const fromDist = new URL("../../dist/lib/commands/version.js", import.meta.url).pathname;
    expect(packageVersion(fromDist)).toBe(pkg.version);
  });

  it.each([["--version"], ["-v"], ["version"]])("%s prints it", async (flag) => {
    expect(await run(recordingTable().table, flag)).toEqual({ code: 0, out: "kgw 9.8.7\n", err: "" });
  });

  it("version --json adds Node.js's; anything else is a usage error", async () => {
    const r = await run(recordingTable().table, "version", "--json");
    expect(JSON.parse(r.out)).toEqual({ version: "9.8.7", node: process.version });
    expect((await run(recordingTable().table, "version", "--bogus")).code).toBe(EXIT.USAGE);
  });
});
