/**
 * Destructive commands ask first: --yes goes ahead, a person at a terminal is asked (a tenant's
 * deletion wants its id typed), and without a terminal the command refuses and says to pass
 * --yes. Checked with an injected prompter, down to the store: nothing changes unless confirmed.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { confirm, NO_TERMINAL, type Prompter } from "../../lib/commands/confirm.js";
import { EXIT } from "../../lib/commands/exit-codes.js";
import { parseTenantCommand } from "../../lib/commands/tenant/parse-tenant-command.js";
import { runTenantCommand } from "../../lib/commands/tenant/run-tenant-command.js";
import { openFileTenantStore } from "../../lib/tenancy/file-store/file-tenant-store.js";

/** A terminal where the person types `answers` in turn; records the questions asked. */
function terminal(...answers: (string | undefined)[]): Prompter & { questions: string[] } {
  const questions: string[] = [];
  return {
    interactive: true,
    questions,
    ask: async (q) => {
      questions.push(q);
      return answers.shift();
    },
  };
}

describe("confirm", () => {
  const yesNo = { action: "Revoke credential ab of tenant acme.", expect: "yes" } as const;
  const typed = { action: "Delete tenant acme.", expect: { exactly: "acme" } } as const;

  it("--yes confirms without asking, terminal or not", async () => {
    const t = terminal();
    expect(await confirm(yesNo, true, t)).toBe("confirmed");
    expect(await confirm(typed, true, NO_TERMINAL)).toBe("confirmed");
    expect(t.questions).toEqual([]);
  });

  it("without a terminal refuses instead of asking", async () => {
    expect(await confirm(yesNo, false, NO_TERMINAL)).toBe("no-terminal");
    expect(await confirm(yesNo, false, { interactive: false, ask: async () => "y" })).toBe("no-terminal");
  });

  it.each([
    ["y", "confirmed"],
    ["YES", "confirmed"],
    [" yes \n", "confirmed"],
    ["", "declined"],
    ["n", "declined"],
    ["yess", "declined"],
    [undefined, "declined"],
  ] as const)("y/N: %j is %s", async (answer, outcome) => {
    const t = terminal(answer);
    expect(await confirm(yesNo, false, t)).toBe(outcome);
    expect(t.questions[0]).toBe("Revoke credential ab of tenant acme.\nContinue? [y/N] ");
  });

  it.each([
    ["acme", "confirmed"],
    ["y", "declined"],
    ["ACME", "declined"],
    ["acme2", "declined"],
  ] as const)("typing the id: %j is %s", async (answer, outcome) => {
    const t = terminal(answer);
    expect(await confirm(typed, false, t)).toBe(outcome);
    expect(t.questions[0]).toContain("Type acme to confirm");
  });
});

describe("kgw tenant delete and revoke", () => {
  let root: string;
  let env: Record<string, string>;
  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), "kgw-confirm-"));
    env = { KGW_TENANT_STORE_DIR: path.join(root, "store") };
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  async function kgw(prompter: Prompter | undefined, ...argv: string[]) {
    const parsed = parseTenantCommand([...argv, "--json"], env);
    if (parsed.help) throw new Error("help");
    let out = "";
    let err = "";
    const code = await runTenantCommand(parsed.command, {
      out: (t) => {
        out += t;
      },
      err: (t) => {
        err += t;
      },
      ...(prompter ? { prompter } : {}),
    });
    return { code, out, err };
  }
  const state = async (id: string) => {
    const store = await openFileTenantStore(env.KGW_TENANT_STORE_DIR!);
    try {
      return (await store.get(id))?.state;
    } finally {
      await store.close();
    }
  };
  const agentTokenId = (created: string) =>
    (JSON.parse(created) as { agentToken: string }).agentToken.split("_")[3]!;

  it("delete without a terminal and without --yes refuses, exits 5, and changes nothing", async () => {
    expect((await kgw(undefined, "create", "acme", "--bundle=false")).code).toBe(0);
    const r = await kgw(undefined, "delete", "acme");
    expect(r.code).toBe(EXIT.NOT_CONFIRMED);
    expect(r.err).toContain("standard input is not a terminal");
    expect(r.err).toContain("pass --yes");
    expect(r.out).toBe("");
    expect(await state("acme")).toBe("active");
  });

  it("delete on a terminal goes ahead only when the tenant's id is typed", async () => {
    const wrong = terminal("y");
    expect((await kgw(wrong, "delete", "acme")).code).toBe(EXIT.NOT_CONFIRMED);
    expect(wrong.questions[0]).toMatch(/Delete tenant acme: .*\nType acme to confirm: $/);
    expect(await state("acme")).toBe("active");
    expect((await kgw(terminal("acme"), "delete", "acme")).code).toBe(EXIT.OK);
    expect(await state("acme")).toBe("deleted");
  });

  it("a missing tenant is reported as not found (3) before anyone is asked", async () => {
    const t = terminal("nobody");
    expect(await kgw(t, "delete", "nobody")).toMatchObject({
      code: EXIT.NOT_FOUND,
      err: expect.stringContaining("tenant nobody not found"),
    });
    expect(t.questions).toEqual([]);
  });

  it("revoke asks y/N; a revoked credential is 4 (already so) the second time, a wrong id 3", async () => {
    const created = await kgw(undefined, "create", "globex", "--bundle=false");
    const id = agentTokenId(created.out);
    expect((await kgw(undefined, "revoke", "globex", id)).code).toBe(EXIT.NOT_CONFIRMED);
    expect((await kgw(terminal("n"), "revoke", "globex", id)).code).toBe(EXIT.NOT_CONFIRMED);
    const t = terminal("y");
    expect((await kgw(t, "revoke", "globex", id)).code).toBe(EXIT.OK);
    expect(t.questions[0]).toContain(`Revoke credential ${id} of tenant globex`);
    const again = await kgw(undefined, "revoke", "globex", id, "--yes");
    expect(again).toMatchObject({ code: EXIT.ALREADY, err: expect.stringContaining("already revoked") });
    expect((await kgw(terminal("y"), "revoke", "globex", "0123456789abcdef")).code).toBe(EXIT.NOT_FOUND);
  });
});
