/**
 * A local fleet on one machine, as an operator would run one, for trying the hosted mode without
 * AWS: a DynamoDB-compatible server (dynalite, in this process), a throwaway CA, three
 * `kgw server --registry-table` instances with peer ports, tenant `acme` made with
 * `kgw tenant --table`, its agent connected to instance 1, and a "cluster" HTTP service only
 * the agent is meant to reach. Then a request enters at every instance and reaches the service
 * through acme's agent (instances 2 and 3 forward over their peer links).
 *
 *   npm run fleet:local             # keeps running; prints curl lines; Ctrl-C stops it all
 *   npm run fleet:local -- --once   # the requests, then stop
 *
 * Ports: instance i (1..3) listens on 18i32 (every role, like 8132), 18i33 admin, 18i34 health,
 * 18i35 peer, all on 127.0.0.1. Everything is written under a temporary directory it prints.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, openSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo, Server } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { BENCH_CREDENTIALS, BENCH_REGION, localAwsEnv } from "../bench/harness/local-aws.js";
import { getThroughConnect } from "../lib/demo/connect-request.js";
import { issuePeerCertificate } from "../lib/fleet/peer/peer-identity.js";
import { createCa } from "../lib/pki/ca.js";
import { writePemFiles } from "../lib/pki/files.js";
import { createTable } from "../lib/registry/dynamo/table.js";

// The SDK's notice that its 2027 releases need Node.js 22 (docs/REGISTRY.md): known, and noise here.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";

const TABLE = "kgw-local";
const TENANT = "acme";
const KGW = path.join(path.dirname(new URL(import.meta.url).pathname), "..", "bin", "kgw.js");
const once = process.argv.includes("--once");
const dir = mkdtempSync(path.join(tmpdir(), "kgw-local-fleet-"));
const children: ChildProcess[] = [];

function run(name: string, args: string[], env: Record<string, string>): ChildProcess {
  const log = openSync(path.join(dir, `${name}.log`), "a");
  const child = spawn(process.execPath, [KGW, ...args], {
    stdio: ["ignore", log, log],
    env: { ...process.env, ...env },
  });
  children.push(child);
  return child;
}

async function status(port: number, urlPath: string): Promise<number> {
  try {
    return (await fetch(`http://127.0.0.1:${port}${urlPath}`)).status;
  } catch {
    return 0;
  }
}

async function until(what: string, check: () => Promise<boolean>, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms / 1000}s (logs in ${dir})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function main(): Promise<void> {
  // DynamoDB, in this process.
  const dynalite = createRequire(import.meta.url)("dynalite") as (o: Record<string, number>) => Server;
  const db = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  await new Promise<void>((r) => db.listen(0, "127.0.0.1", r));
  const dbPort = (db.address() as AddressInfo).port;
  const client = new DynamoDBClient({
    endpoint: `http://127.0.0.1:${dbPort}`,
    region: BENCH_REGION,
    credentials: BENCH_CREDENTIALS,
  });
  await createTable(client, TABLE);
  client.destroy();
  const env = localAwsEnv(dbPort);

  // The PKI: the gateway CA (tenants' certificates, the serving certificate) and peer certificates.
  const ca = await createCa({ commonName: "kgw-local-fleet-ca", validityDays: 7 });
  const serving = await ca.issue({
    commonName: "localhost",
    dnsNames: ["localhost"],
    ipAddresses: ["127.0.0.1"],
    usage: "server",
    validityDays: 7,
  });
  const peer = await issuePeerCertificate(ca);
  const f = await writePemFiles(dir, {
    "ca.pem": ca.certPem,
    "ca-key.pem": ca.keyPem,
    "server.pem": serving.certPem,
    "server-key.pem": serving.keyPem,
    "peer.pem": peer.certPem,
    "peer-key.pem": peer.keyPem,
  });

  // The "cluster" service, and the tenant.
  const service = createServer((_req, res) => res.end(`hello from ${TENANT}'s cluster\n`));
  await new Promise<void>((r) => service.listen(0, "127.0.0.1", r));
  const target = `127.0.0.1:${(service.address() as AddressInfo).port}`;
  const created = path.join(dir, "acme-create.json");
  const tenant = spawn(
    process.execPath,
    [
      KGW,
      "tenant",
      "create",
      TENANT,
      `--table=${TABLE}`,
      "--allow-loopback",
      "--output=json",
      `--out=${path.join(dir, TENANT)}`,
    ],
    {
      stdio: ["ignore", openSync(created, "w", 0o600), "inherit"],
      env: {
        ...process.env,
        ...env,
        KGW_CA_CERT: f["ca.pem"],
        KGW_CA_KEY: f["ca-key.pem"],
        KGW_GATEWAY_ADDRESS: "127.0.0.1:18132",
      },
    },
  );
  const code = await new Promise((r) => tenant.once("exit", r));
  if (code !== 0) throw new Error(`kgw tenant create exited ${String(code)}`);
  const { agentToken, bundle } = JSON.parse(readFileSync(created, "utf8")) as {
    agentToken: string;
    bundle: { files: { caBundle: string; clientCert: string; clientKey: string } };
  };

  // Three instances.
  for (const i of [1, 2, 3]) {
    run(
      `server-${i}`,
      [
        "server",
        `--server-id=local-${i}`,
        `--registry-table=${TABLE}`,
        `--tenant-ca-cert=${f["ca.pem"]}`,
        `--agent-port=18${i}32`,
        "--agent-bind-address=127.0.0.1",
        `--cluster-cert=${f["server.pem"]}`,
        `--cluster-key=${f["server-key.pem"]}`,
        `--peer-port=18${i}35`,
        "--peer-bind-address=127.0.0.1",
        `--peer-advertise-address=127.0.0.1:18${i}35`,
        `--peer-cert=${f["peer.pem"]}`,
        `--peer-key=${f["peer-key.pem"]}`,
        `--peer-ca-cert=${f["ca.pem"]}`,
        `--admin-port=18${i}33`,
        `--health-port=18${i}34`,
        "--health-bind-address=127.0.0.1",
      ],
      env,
    );
  }
  for (const i of [1, 2, 3])
    await until(`instance ${i} ready`, async () => (await status(Number(`18${i}34`), "/readyz")) === 200);

  // acme's agent, on instance 1.
  run(
    "agent",
    [
      "agent",
      "--proxy-server-host=127.0.0.1",
      "--proxy-server-port=18132",
      "--server-name=localhost",
      `--ca-cert=${f["ca.pem"]}`,
      `--agent-id=${TENANT}-agent`,
      "--health-server-port=18193",
      "--admin-server-port=18194",
    ],
    { ...env, KGW_AGENT_TOKEN: agentToken },
  );
  await until("acme's agent", async () => (await status(18133, `/readyz?tenant=${TENANT}`)) === 200);

  const tls = {
    ca: readFileSync(bundle.files.caBundle, "utf8"),
    cert: readFileSync(bundle.files.clientCert, "utf8"),
    key: readFileSync(bundle.files.clientKey, "utf8"),
  };
  for (const i of [1, 2, 3]) {
    const answer = await getThroughConnect({ proxyPort: Number(`18${i}32`), target, path: "/", tls });
    process.stdout.write(`instance ${i}: ${answer.status} ${answer.body}`);
  }
  process.stdout.write(
    `\nA fleet of three, acme's agent on instance 1; everything is in ${dir}.\n` +
      "Try it (any instance):\n" +
      `  curl -sS --proxy-cacert ${bundle.files.caBundle} --proxy-cert ${bundle.files.clientCert} --proxy-key ${bundle.files.clientKey} \\\n` +
      `       --proxy https://localhost:18332 --proxytunnel http://${target}/\n` +
      "  curl -s http://127.0.0.1:18233/readyz?verbose     # instance 2's view of the fleet\n" +
      "  curl -s http://127.0.0.1:18233/metrics | grep kgw_fleet_\n",
  );
  const stop = async () => {
    for (const c of children) c.kill("SIGTERM");
    await Promise.all(
      children.map((c) => (c.exitCode === null ? new Promise((r) => c.once("exit", r)) : undefined)),
    );
    service.close();
    db.close();
  };
  if (once) return stop();
  process.stdout.write("Ctrl-C stops everything.\n");
  await new Promise<void>((r) => process.once("SIGINT", () => r()));
  await stop();
}

main().catch(async (err: unknown) => {
  process.stderr.write(`local fleet: ${err instanceof Error ? err.message : String(err)}\n`);
  for (const c of children) c.kill("SIGKILL");
  process.exit(1);
});
