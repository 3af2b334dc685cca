/**
 * A runbook's shell blocks (```sh, ```bash) as the commands an operator types, and what each
 * needs: the test of docs/DEPLOY.md (test/integration/deploy-runbook.test.ts) runs those that
 * need no AWS account, as written, and checks the others without running them.
 *
 * A command is one line, or several joined by a trailing backslash or by an open `{` (a function
 * definition). Comment lines are dropped.
 */

export type Needs =
  /** Runs here as written. */
  | "local"
  /** Calls AWS, but only what the local stand-ins serve (the fake `aws`, runbook-aws.mjs). */
  | "stand-in"
  /** Needs an AWS account, a cluster or an image registry: checked (syntax, CDK context), never run. */
  | "account";

export interface RunbookCommand {
  /** 1-based line in the document where it starts, for messages. */
  line: number;
  text: string;
  needs: Needs;
}

/**
 * What each command needs, by the command it runs: the one rule table. A command's need is the
 * highest of the commands it contains (after `;`, `&&`, `||`, `|`, `do`, `then`, inside `$(…)`),
 * and a shell function defined by the runbook (`out`, `roll`) needs what its body needs.
 */
const RULES: readonly (readonly [RegExp, Needs])[] = [
  [/^aws cloudformation describe-stacks\b/, "stand-in"],
  [/^aws secretsmanager put-secret-value\b/, "stand-in"],
  [/^aws\b/, "account"],
  [/^kubectl\b/, "account"],
  [/^npx cdk (deploy|destroy|bootstrap)\b/, "account"],
  // A registry (the published image, a mirror): network and credentials this machine lacks.
  [/^(cosign|crane|docker)\b/, "account"],
];

const RANK: Record<Needs, number> = { local: 0, "stand-in": 1, account: 2 };
const FUNCTION_DEF = /^([A-Za-z_][A-Za-z0-9_]*)\(\)\s*\{/;

export function shellBlocks(markdown: string): { line: number; body: string }[] {
  const blocks: { line: number; body: string }[] = [];
  const re = /^```(?:sh|bash)\n([\s\S]*?)^```$/gm;
  for (let m = re.exec(markdown); m; m = re.exec(markdown)) {
    blocks.push({ line: markdown.slice(0, m.index).split("\n").length + 1, body: m[1]! });
  }
  return blocks;
}

export function runbookCommands(markdown: string): RunbookCommand[] {
  const functions = new Map<string, Needs>();
  const commands: RunbookCommand[] = [];
  for (const block of shellBlocks(markdown)) {
    const lines = block.body.split("\n");
    let text = "";
    let start = 0;
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i]!;
      if (text === "" && (line.trim() === "" || line.trim().startsWith("#"))) continue;
      if (text === "") start = block.line + i;
      text += (text === "" ? "" : "\n") + line;
      const open = (text.match(/\{/g) ?? []).length - (text.match(/\}/g) ?? []).length;
      if (line.endsWith("\\") || open > 0) continue;
      const def = FUNCTION_DEF.exec(text);
      const needs = needsOf(def ? text.slice(def[0].length) : text, functions);
      if (def) functions.set(def[1]!, needs);
      commands.push({ line: start, text, needs: def ? "local" : needs });
      text = "";
    }
    if (text !== "") throw new Error(`line ${start}: a command that never ends (a backslash or { left open)`);
  }
  return commands;
}

function needsOf(text: string, functions: ReadonlyMap<string, Needs>): Needs {
  let worst: Needs = "local";
  const segments = text
    .replace(/\\\n/g, " ")
    .split(/\$\(|\)|;|&&|\|\||\||\n|\bdo\b|\bthen\b|\{|\}/)
    .map((s) => s.trim().replace(/^"+|"+$/g, ""));
  for (const segment of segments) {
    // Leading assignments (VAR=value, VAR="…") are the environment, not the command.
    const command = segment.replace(/^(?:[A-Za-z_][A-Za-z0-9_]*=(?:"[^"]*"|\S*)\s*)+/, "");
    const word = command.split(/\s+/)[0] ?? "";
    const needs = functions.get(word) ?? RULES.find(([re]) => re.test(command))?.[1] ?? "local";
    if (RANK[needs] > RANK[worst]) worst = needs;
  }
  return worst;
}

/** A cdk command's stacks and `-c key=value` context, as the CLI reads them. */
export function cdkInvocation(text: string): {
  verb: string;
  stacks: string[];
  context: Map<string, string>;
} {
  const words = text.replace(/\\\n/g, " ").trim().split(/\s+/);
  const at = words.indexOf("cdk");
  const verb = words[at + 1] ?? "";
  const stacks: string[] = [];
  const context = new Map<string, string>();
  for (let i = at + 2; i < words.length; i++) {
    const w = words[i]!;
    if (w === "-c" || w === "--context") {
      const [key, ...value] = (words[++i] ?? "").split("=");
      context.set(key!, value.join("="));
    } else if (!w.startsWith("-") && !w.startsWith("aws://")) stacks.push(w);
  }
  return { verb, stacks, context };
}
