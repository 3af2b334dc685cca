/**
 * README's "Hosting many clusters" walkthrough, run as written: its shell block is read from
 * README.md and each command runs, in order, in an empty temporary directory with this checkout's
 * `kgw` (node bin/kgw.js, the compiled dist/ that `npm install` builds), against a loopback HTTP
 * service standing in for the cluster. What the test substitutes (the README says the same, under
 * the block): `npx kgw` is `node bin/kgw.js`; ports 8132 and 8080 are free ports; `kgw server`
 * is told that port (its default) and gets free admin and health ports and a --ports-file, which is what the test waits on; the
 * install link is the one `install-token` printed; `kubectl apply -f -` runs the manifest's agent
 * as `kgw agent`; `kubectl logs` is left to the `curl` under it. A README edit that breaks a step,
 * renames a file or drops one of the steps fails here.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { closedPort } from "../helpers/backends.js";
import { announcedPorts, httpGet } from "../helpers/endpoints.js";
import { tempDir, waitUntil } from "../helpers/fleet.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const KGW = path.join(ROOT, "bin", "kgw.js");
const README = path.join(ROOT, "README.md");
if (!existsSync(path.join(ROOT, "dist", "services", "kgw.js"))) {
  throw new Error("bin/kgw.js runs dist/: run `npm run build` (npm install does) before this test");
}

/** The walkthrough's commands: continuation lines joined, comments and blank lines dropped. */
function walkthroughCommands(readme: string): string[] {
  const start = readme.indexOf("## Hosting many clusters");
  if (start < 0) throw new Error('README.md has no "## Hosting many clusters" section');
  const next = readme.indexOf("\n## ", start + 3);
  const section = readme.slice(start, next < 0 ? undefined : next);
  const blocks = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
  const joined = blocks.join("\n").replace(/\\\n\s*/g, "");
  return joined
    .split("\n")
    .map((line) => line.replace(/(^|\s+)#.*$/, "").trim())
    .filter((line) => line !== "");
}

interface Background {
  child: ChildProcess;
  output: string[];
  exited: Promise<number | null>;
}

const work = tempDir("kgw-walkthrough-");
const children: Background[] = [];
let backend: Server | undefined;
const BACKEND_ANSWER = "hello from a service on acme's node";

afterAll(async () => {
  for (const c of children) if (c.child.exitCode === null) c.child.kill("SIGTERM");
  // The server and the agent leave on SIGTERM as an operator's would: cleanly.
  const codes = await Promise.all(children.map((c) => c.exited));
  expect(codes, children.map((c) => c.output.join("").slice(-500)).join("\n")).toEqual(codes.map(() => 0));
  backend?.closeAllConnections();
  await new Promise((r) => (backend ? backend.close(r) : r(undefined)));
  work.remove();
});

it("README's hosted walkthrough runs as written: a request goes through acme's agent to a loopback backend", async () => {
  // The service on the agent's loopback (the README suggests python3 -m http.server 8080).
  backend = createServer((_req, res) => res.end(BACKEND_ANSWER));
  await new Promise<void>((r) => backend!.listen(0, "127.0.0.1", r));
  const backendAddress = `127.0.0.1:${(backend.address() as AddressInfo).port}`;
  const [agentPort, adminPort, healthPort] = [await closedPort(), await closedPort(), await closedPort()];
  const portsFile = path.join(work.dir, ".server-ports.json");
  const env: Record<string, string> = { ...(process.env as Record<string, string>) };
  for (const k of Object.keys(env)) if (k.startsWith("KGW_")) delete env[k];
  env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = "true";

  /** The command with only the documented substitutions made. */
  const substitute = (command: string) =>
    command
      .replaceAll(":8132", `:${agentPort}`)
      .replaceAll("127.0.0.1:8080", backendAddress)
      .replaceAll(/\bnpx kgw\b/g, `${JSON.stringify(process.execPath)} ${JSON.stringify(KGW)}`);

  const sh = (command: string) =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn("bash", ["-c", command], { cwd: work.dir, env, stdio: ["ignore", "pipe", "pipe"] });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d: Buffer) => {
        stdout += d.toString();
      });
      child.stderr.on("data", (d: Buffer) => {
        stderr += d.toString();
      });
      child.once("close", (code) => resolve({ code, stdout, stderr }));
    });
  const background = (command: string): Background => {
    const child = spawn("bash", ["-c", `exec ${command}`], {
      cwd: work.dir,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    const output: string[] = [];
    child.stdout!.on("data", (d: Buffer) => output.push(d.toString()));
    child.stderr!.on("data", (d: Buffer) => output.push(d.toString()));
    const bg = {
      child,
      output,
      exited: new Promise<number | null>((r) => child.once("exit", (code) => r(code))),
    };
    children.push(bg);
    return bg;
  };
  const mustRun = async (command: string) => {
    const r = await sh(command);
    if (r.code !== 0) throw new Error(`"${command}" exited ${r.code}:\n${r.stdout}\n${r.stderr}`);
    return r.stdout;
  };

  let installLink = "";
  let answer = "";
  const ran: string[] = [];
  for (const original of walkthroughCommands(readFileSync(README, "utf8"))) {
    const command = substitute(original);
    if (original.startsWith("export ")) {
      // `export A=b C=d`: for every later command (bash expands the values as it would).
      const out = await mustRun(`${command} && env -0`);
      for (const entry of out.split("\0")) {
        const eq = entry.indexOf("=");
        if (eq > 0 && entry.startsWith("KGW_")) env[entry.slice(0, eq)] = entry.slice(eq + 1);
      }
      ran.push("export");
    } else if (original.startsWith("npx kgw server") && command.endsWith("&")) {
      const server = background(
        `${command.slice(0, -1).trim()} --agent-port=${agentPort} --admin-port=${adminPort} --health-port=${healthPort} --ports-file=${portsFile}`,
      );
      await waitUntil(
        () => {
          if (server.child.exitCode !== null) throw new Error(`kgw server exited: ${server.output.join("")}`);
          return announcedPorts(portsFile) !== null;
        },
        20_000,
        "kgw server announcing its ports",
      );
      await waitUntil(
        async () => (await httpGet(`127.0.0.1:${healthPort}`, "/healthz")).status === 200,
        10_000,
        "/healthz",
      );
      ran.push("kgw server");
    } else if (original.startsWith("npx kgw tenant install-token")) {
      const out = await mustRun(command);
      installLink = /https:\/\/\S+\/v1\/install\/kgw_install_acme_\S+\.yaml/.exec(out)?.[0] ?? "";
      expect(installLink, out).not.toBe("");
      ran.push("kgw tenant install-token");
    } else if (original.startsWith("npx kgw ")) {
      await mustRun(command);
      ran.push(original.split(" ").slice(1, 4).join(" "));
    } else if (original.includes("| kubectl apply -f -")) {
      const fetchPart = command
        .slice(0, command.indexOf("|"))
        .replace(/https:\/\/\S+\/v1\/install\/\S+\.yaml/, installLink);
      startManifestAgent(await mustRun(fetchPart), work.dir, background);
      await waitUntil(
        async () => (await httpGet(`127.0.0.1:${adminPort}`, "/readyz?tenant=acme")).status === 200,
        20_000,
        "acme's agent connected (admin /readyz?tenant=acme)",
      );
      ran.push("install link | kubectl apply");
    } else if (original.startsWith("kubectl logs")) {
      ran.push("kubectl logs (by the curl below)");
    } else if (original.startsWith("curl ")) {
      answer = await mustRun(`${command} -fsS --max-time 20`);
      ran.push("curl through the gateway");
    } else {
      throw new Error(`the walkthrough has a command this test does not know how to run: ${original}`);
    }
  }

  expect(ran).toEqual([
    "export",
    "export",
    "kgw pki ca",
    "kgw pki serving",
    "kgw tenant create",
    "kgw server",
    "kgw tenant install-token",
    "install link | kubectl apply",
    "kubectl logs (by the curl below)",
    "curl through the gateway",
  ]);
  // The operator's view: the file names the README uses are the ones the commands wrote.
  for (const f of ["ca.pem", "ca-key.pem", "tls.pem", "tls-key.pem", "acme/client.crt", "acme/ca.crt"]) {
    expect(existsSync(path.join(work.dir, f)), f).toBe(true);
  }
  // The backend saw the request only acme's agent could make: the body is the backend's.
  expect(answer).toBe(BACKEND_ANSWER);

  // What the README says of the default policy: without --allow-loopback, the same dial is
  // refused (403), within the store's watch interval of the change.
  const dial = walkthroughCommands(readFileSync(README, "utf8")).find((c) => c.startsWith("curl -p "))!;
  await mustRun(`${substitute("npx kgw")} tenant policy acme --set '*' '0.0.0.0/0' '::/0'`);
  let refusal = "";
  await waitUntil(
    async () => {
      const r = await sh(`${substitute(dial)} -fsS --max-time 20`);
      refusal = r.stderr;
      return r.code !== 0;
    },
    15_000,
    "the loopback dial refused once loopback is no longer allowed",
  );
  expect(refusal).toMatch(/\b403\b/);
});

/**
 * What `kubectl apply` of the install manifest would run: the Deployment's agent container with
 * its arguments, the token from its Secret and the CA from its ConfigMap, mounted where the
 * arguments expect them (here: files in the test's directory).
 */
function startManifestAgent(
  manifest: string,
  dir: string,
  background: (command: string) => Background,
): void {
  const docs = parseAllDocuments(manifest).map((d) => d.toJSON() as Record<string, never>);
  const kind = (k: string) =>
    docs.find((d) => (d as { kind?: string }).kind === k) as Record<string, unknown>;
  const secret = kind("Secret") as { data: { token: string } };
  const configMap = kind("ConfigMap") as { data: Record<string, string> };
  const deployment = kind("Deployment") as {
    spec: { template: { spec: { containers: { command: string[]; args: string[] }[] } } };
  };
  const container = deployment.spec.template.spec.containers[0]!;
  expect(container.command).toEqual(["kgw", "agent"]);
  const tokenFile = path.join(dir, ".agent-token");
  const caFile = path.join(dir, ".agent-ca.crt");
  writeFileSync(tokenFile, Buffer.from(secret.data.token, "base64"), { mode: 0o600 });
  writeFileSync(caFile, configMap.data["ca.crt"]!);
  const args = container.args
    .map((a) =>
      a
        .replace("/etc/kgw/ca/ca.crt", caFile)
        .replace("/etc/kgw/token/token", tokenFile)
        .replace("$(POD_NAME)", "acme-agent-0"),
    )
    .filter((a) => !a.startsWith("--health-server-port="));
  background(
    [process.execPath, KGW, "agent", ...args, "--health-server-port=0", "--admin-server-port=0"]
      .map((a) => `'${a.replaceAll("'", "'\\''")}'`)
      .join(" "),
  );
}
