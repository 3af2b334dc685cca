/**
 * docs/DEPLOY.md to the letter. Every ```sh/```bash block is split into commands
 * (test/helpers/runbook.ts), and each is classified by what it runs, in one rule table:
 *
 *  - local (kgw pki, kgw tenant, cdk synth, files): run as written, in order, in one bash session,
 *    in a temporary folder that looks like a checkout of this repository (so `npx kgw` and
 *    `npx cdk` are this repository's), against dynalite and a Secrets Manager stand-in;
 *  - stand-in (`aws cloudformation describe-stacks`, `aws secretsmanager put-secret-value`): run
 *    as written too, by the `aws` on the session's PATH (test/helpers/runbook-aws.mjs), which
 *    answers from the synthesized templates and the Secrets Manager stand-in;
 *  - account (every other `aws`, `kubectl`, `npx cdk deploy|destroy|bootstrap`, and the
 *    runbook's functions that call them): never run; each must pass `bash -n`, and the `-c`
 *    context of every cdk command must satisfy cdk/lib/deploy-config.ts and synthesize the app
 *    (what `cdk deploy`, `destroy` and `bootstrap` do before any AWS call).
 *
 * Then the certificate rotation is checked where it matters: a real gateway process, started with
 * the exact task command and the TLS secret of the rotation's first step, accepts a caller
 * certificate of the old CA and one of the new CA; with the last step's, only the new one.
 */
import { spawn } from "node:child_process";
import { X509Certificate } from "node:crypto";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { request as httpsRequest } from "node:https";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readDeployConfig } from "../../cdk/lib/deploy-config.js";
import { gatewayCommand, PEM_ENV, PEM_ENV_SOURCES } from "../../cdk/lib/gateway-command.js";
import { GATEWAY_PORTS } from "../../cdk/lib/ports.js";
import { DEFAULT_KGW_AGENT_IMAGE } from "../../lib/tenancy/manifest/images.js";
import { closedPort } from "../helpers/backends.js";
import { type LocalDynamo, startLocalDynamo } from "../helpers/dynalite.js";
import { REPO, requireBuild } from "../helpers/kgw-bin.js";
import { spawnKgwAnnouncing } from "../helpers/kgw-process.js";
import { activeResources, expectNoLeakedResources } from "../helpers/resources.js";
import { cdkInvocation, type RunbookCommand, runbookCommands } from "../helpers/runbook.js";
import { type LocalSecretsManager, startLocalSecretsManager } from "../helpers/secrets-manager.js";

const DEPLOY_MD = readFileSync(path.join(REPO, "docs/DEPLOY.md"), "utf8");
/** The stack outputs that name a secret, and the stand-in secret behind each. */
const SECRET_OUTPUTS = ["GatewayCaSecretArn", "GatewayTlsSecretArn", "PeerCaSecretArn", "PeerTlsSecretArn"];

let dir: string;
let sm: LocalSecretsManager;
let dynamo: LocalDynamo;
let values: Record<string, string>;
let baseline: Map<string, number>;

/** A folder that looks like a checkout: the repository's files, linked; cdk.out and the runbook's own files are its own. */
function checkoutLike(root: string): void {
  for (const entry of readdirSync(REPO)) {
    if ([".git", "cdk.out", "coverage"].includes(entry)) continue;
    symlinkSync(path.join(REPO, entry), path.join(root, entry));
  }
  const bin = path.join(root, ".runbook-bin");
  mkdirSync(bin);
  const aws = path.join(bin, "aws");
  writeFileSync(
    aws,
    `#!/bin/sh\nexec "${process.execPath}" "${path.join(REPO, "test/helpers/runbook-aws.mjs")}" "$@"\n`,
  );
  chmodSync(aws, 0o755);
}

function sessionEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  // The operator's shell: no kgw settings but the runbook's, and nothing from this test run.
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !k.startsWith("KGW_") && !k.startsWith("AWS_") && !k.startsWith("VITEST"))
      env[k] = v;
  }
  return {
    ...env,
    ...dynamo.env,
    ...sm.env,
    PATH: `${path.join(dir, ".runbook-bin")}:${process.env.PATH}`,
    KGW_RUNBOOK_VALUES: JSON.stringify(values),
    // npx must never fetch a package: every command is this repository's.
    npm_config_offline: "true",
    npm_config_update_notifier: "false",
    CDK_DISABLE_VERSION_CHECK: "true",
  };
}

function run(
  command: string,
  args: string[],
  options: { input?: string; cwd?: string } = {},
): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(command, args, {
      cwd: options.cwd ?? dir,
      env: sessionEnv(),
      // Not a pipe unless there is input: Node's pipes are socket pairs, and a bash whose stdin
      // is a socket and whose SHLVL is unset thinks sshd started it and reads ~/.bashrc, which
      // on a developer's machine may put another `aws` ahead of the stand-in on the PATH.
      stdio: [options.input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout?.on("data", (d: Buffer) => (out += d));
    child.stderr?.on("data", (d: Buffer) => (err += d));
    child.stdin?.end(options.input);
    child.once("close", (code) => resolve({ code, out, err }));
  });
}

/** Files holding a private key under `root`, the repository's linked files aside (the runbook's own). */
function keysLeft(root: string, sub = ""): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(path.join(root, sub), { withFileTypes: true })) {
    const rel = path.join(sub, entry.name);
    if (entry.isSymbolicLink() || rel === "cdk.out") continue;
    if (entry.isDirectory()) found.push(...keysLeft(root, rel));
    else if (readFileSync(path.join(root, rel), "utf8").includes("PRIVATE KEY")) found.push(rel);
  }
  return found.sort();
}

/** One bash script: each runnable command as written, then a check of its exit status. */
function script(commands: readonly RunbookCommand[]): string {
  const steps = commands.map((c, i) =>
    c.needs === "account"
      ? `: "step ${i} needs an AWS account: not run"`
      : `${c.text}\n__kgw_step $? ${i} ${c.line}`,
  );
  return [
    '__kgw_step() { if [ "$1" != 0 ]; then echo "__KGW_FAILED step $2 (DEPLOY.md line $3) exited $1" >&2; exit 1; fi; }',
    ...steps,
    "echo __KGW_DONE",
  ].join("\n");
}

beforeAll(async () => {
  requireBuild();
  baseline = activeResources();
  dir = mkdtempSync(path.join(tmpdir(), "kgw-runbook-"));
  checkoutLike(dir);
  [sm, dynamo] = await Promise.all([startLocalSecretsManager(), startLocalDynamo()]);
  // What `cdk deploy Kgw-Stateful` leaves: four secrets holding "{}", and the table.
  values = { TableName: dynamo.tableName };
  for (const key of SECRET_OUTPUTS) values[key] = sm.create(`KgwStateful${key.replace(/Arn$/, "")}`);
}, 60_000);

afterAll(async () => {
  await Promise.all([sm?.close(), dynamo?.close()]);
  rmSync(dir, { recursive: true, force: true });
  await expectNoLeakedResources(baseline);
});

describe("the runner", () => {
  it("classifies by the command run, and fails on a runnable command that fails", async () => {
    const doc = [
      "```sh",
      "out() { aws cloudformation describe-stacks --stack-name Kgw-Stateful --output text; }",
      'roll() { aws ecs update-service --cluster "$(out ClusterName Kgw-Service)" &&',
      "  aws ecs wait services-stable; }",
      'TABLE="$(out TableName)"',
      "for s in a b; do aws secretsmanager delete-secret --secret-id $s; done",
      "npx kgw pki ca --out pki/ca \\",
      "  --peer",
      "roll",
      "npx kgw pki serving --out pki/tls   # no CA: exits 2",
      "```",
    ].join("\n");
    const commands = runbookCommands(doc);
    expect(commands.map((c) => c.needs)).toEqual([
      "local",
      "local",
      "stand-in",
      "account",
      "local",
      "account",
      "local",
    ]);
    // Run without the stand-in command (no synthesized stacks here): the failing one is named.
    const own = mkdtempSync(path.join(tmpdir(), "kgw-runner-"));
    checkoutLike(own);
    const r = await run("bash", ["-c", script(commands.filter((c) => c.needs !== "stand-in"))], { cwd: own });
    rmSync(own, { recursive: true, force: true });
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/__KGW_FAILED step 5 \(DEPLOY.md line 10\) exited 2/);
  });
});

describe("docs/DEPLOY.md, to the letter", () => {
  const commands = runbookCommands(DEPLOY_MD);

  it("has commands of every kind, each syntactically sound", async () => {
    for (const needs of ["local", "stand-in", "account"] as const) {
      expect(
        commands.some((c) => c.needs === needs),
        needs,
      ).toBe(true);
    }
    for (const c of commands) {
      const r = await run("bash", ["-n"], { input: c.text });
      expect(r, `DEPLOY.md line ${c.line}: ${c.text}`).toMatchObject({ code: 0, err: "" });
    }
  });

  it("runs every command that needs no AWS account, as written", async () => {
    const r = await run("bash", ["-c", script(commands)]);
    const failed = /__KGW_FAILED step (\d+)/.exec(r.err);
    const which = failed ? commands[Number(failed[1])]!.text : "";
    expect({ code: r.code, failed: which, err: failed ? r.err.slice(-3000) : "" }).toEqual({
      code: 0,
      failed: "",
      err: "",
    });
    expect(r.out).toContain("__KGW_DONE");

    // Where the runbook leaves things: the CAs in Secrets Manager (rotated), no key on disk.
    const ca = JSON.parse(sm.value(values.GatewayCaSecretArn!)!);
    expect(new X509Certificate(readFileSync(path.join(dir, "gateway-ca.pem"))).fingerprint256).toBe(
      new X509Certificate(ca.certificate).fingerprint256,
    );
    expect(existsSync(path.join(dir, "pki"))).toBe(false);
    expect(keysLeft(dir)).toEqual(["acme-new-ca/client.key", "acme/client.key"]); // the tenant's, to hand over
    expect(sm.history(values.GatewayCaSecretArn!)).toHaveLength(3); // {}, the first CA, the new one
    expect(sm.history(values.PeerCaSecretArn!)).toHaveLength(3);
    for (const f of ["acme/client.crt", "acme-new-ca/client.crt", "acme-agent.yaml"]) {
      expect(existsSync(path.join(dir, f)), f).toBe(true);
    }
  }, 300_000);

  it("gives every cdk command a context the app accepts, and synthesizes each", async () => {
    const cdk = commands.filter((c) => /^(?:\S+=\S+\s+)*npx cdk /.test(c.text));
    const synthesized = new Set(
      cdk.filter((c) => c.needs === "local").map((c) => JSON.stringify([...cdkInvocation(c.text).context])),
    );
    const toSynth = new Map<string, Map<string, string>>();
    for (const c of cdk.filter((x) => x.needs === "account")) {
      const { verb, stacks, context } = cdkInvocation(c.text);
      const where = `DEPLOY.md line ${c.line}: npx cdk ${verb}`;
      const config = readDeployConfig((key) => context.get(key), {});
      for (const stack of stacks) {
        expect([`${config.stackPrefix}-Stateful`, `${config.stackPrefix}-Service`], where).toContain(stack);
      }
      const key = JSON.stringify([...context]);
      if (!synthesized.has(key)) toSynth.set(key, context);
    }
    expect(cdk.filter((c) => c.needs === "account").length).toBeGreaterThanOrEqual(4);
    for (const context of toSynth.values()) {
      const flags = [...context].flatMap(([k, v]) => ["-c", `${k}=${v}`]);
      const r = await run("npx", ["cdk", "synth", "--quiet", "--no-notices", ...flags]);
      expect({ code: r.code, flags, err: r.code === 0 ? "" : r.err.slice(-2000) }).toEqual({
        code: 0,
        flags,
        err: "",
      });
    }
  }, 300_000);
});

/** CONNECT through a gateway port with a caller bundle's files, as kube-apiserver dials it. */
function connectWithBundle(
  port: number,
  bundleDir: string,
): Promise<{ status: number; code?: string } | { tls: string }> {
  return new Promise((resolve) => {
    const req = httpsRequest({
      method: "CONNECT",
      host: "127.0.0.1",
      port,
      path: "10.0.0.1:443",
      servername: "gateway.example.com",
      ca: readFileSync(path.join(bundleDir, "ca.crt")),
      cert: readFileSync(path.join(bundleDir, "client.crt")),
      key: readFileSync(path.join(bundleDir, "client.key")),
      agent: false,
    });
    req.once("connect", (res, socket) => {
      socket.destroy();
      const code = res.headers["x-kgw-error-code"];
      resolve({ status: res.statusCode ?? 0, ...(typeof code === "string" ? { code } : {}) });
    });
    req.once("error", (err: NodeJS.ErrnoException) => resolve({ tls: err.code ?? err.message }));
    req.end();
  });
}

describe("the gateway CA's rotation, with the real gateway", () => {
  /** The task's command and secrets (cdk/lib/gateway-command.ts), on loopback ports. */
  async function startTask(tls: Record<string, string>, peer: Record<string, string>) {
    const ports = { gateway: await closedPort(), peer: await closedPort() };
    const args = gatewayCommand({
      tableName: dynamo.tableName,
      domainName: "gateway.example.com",
      gracefulShutdownSeconds: 1,
      agentImage: DEFAULT_KGW_AGENT_IMAGE,
    })
      .map((a) =>
        a
          .replace(`--agent-port=${GATEWAY_PORTS.gateway}`, `--agent-port=${ports.gateway}`)
          .replace(`--peer-port=${GATEWAY_PORTS.peer}`, `--peer-port=${ports.peer}`)
          .replace(/^--(install|admin|health)-port=\d+$/, "--$1-port=0")
          .replace("=0.0.0.0", "=127.0.0.1"),
      )
      .filter((a) => a !== "--audit-log=-");
    const env: Record<string, string> = { ...dynamo.env };
    for (const [name, source] of Object.entries(PEM_ENV_SOURCES)) {
      env[PEM_ENV[name as keyof typeof PEM_ENV]] = (source.secret === "gatewayTls" ? tls : peer)[source.key]!;
    }
    const p = spawnKgwAnnouncing(
      [...args, `--peer-advertise-address=127.0.0.1:${ports.peer}`, "--log-level=warn"],
      env,
    );
    await p.ports();
    return {
      port: ports.gateway,
      stop: async () => {
        p.child.kill("SIGTERM");
        await p.exited;
      },
    };
  }

  const versions = (arn: string) =>
    sm
      .history(arn)
      .slice(1)
      .map((v) => JSON.parse(v) as Record<string, string>);
  const certs = (bundle: string) => bundle.match(/-----BEGIN CERTIFICATE-----/g)?.length ?? 0;

  it("trusts callers of both CAs during the overlap, and only the new CA's at the end", async () => {
    // The runbook ran (the test above): pick the TLS secrets of the rotation's steps 1 and 4.
    const tlsVersions = versions(values.GatewayTlsSecretArn!);
    const [oldCa, newCa] = versions(values.GatewayCaSecretArn!).map(
      (v) => new X509Certificate(v.certificate!),
    );
    const issuer = (v: Record<string, string>) => new X509Certificate(v.certificate!).checkIssued(oldCa!);
    const step1 = tlsVersions.find((v) => certs(v.caCertificate!) === 2 && issuer(v));
    const step4 = tlsVersions.at(-1)!;
    expect(step1, "a TLS secret trusting both CAs, with the old CA's certificate").toBeDefined();
    expect(certs(step4.caCertificate!)).toBe(1);
    expect(new X509Certificate(step4.certificate!).checkIssued(newCa!)).toBe(true);
    const peer = versions(values.PeerTlsSecretArn!).at(-1)!;

    // The overlap: the old bundle (old CA's certificate, trusting the old CA) and the new one
    // (new CA's certificate, trusting both) both authenticate as acme: no agent yet, so 503.
    const overlap = await startTask(step1!, peer);
    try {
      expect(await connectWithBundle(overlap.port, path.join(dir, "acme"))).toEqual({
        status: 503,
        code: "ERR_NO_AGENT",
      });
      expect(await connectWithBundle(overlap.port, path.join(dir, "acme-new-ca"))).toEqual({
        status: 503,
        code: "ERR_NO_AGENT",
      });
    } finally {
      await overlap.stop();
    }

    // The end: the new CA only. The new bundle goes on; the old one does not get in.
    const end = await startTask(step4, peer);
    try {
      expect(await connectWithBundle(end.port, path.join(dir, "acme-new-ca"))).toEqual({
        status: 503,
        code: "ERR_NO_AGENT",
      });
      expect(await connectWithBundle(end.port, path.join(dir, "acme"))).toHaveProperty("tls");
    } finally {
      await end.stop();
    }
  }, 120_000);
});
