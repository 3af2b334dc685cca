/**
 * A DynamoDB-compatible server for tests: dynalite in-process (in memory) behind a small HTTP
 * front on 127.0.0.1, and the table of lib/registry/dynamo/table.ts created in it.
 *
 * The front is what makes outages testable. It owns the endpoint the clients use, so a test can
 * - `stop()` it (the port refuses connections) and `start()` it again on the same port, while
 *   dynalite keeps its data (closing dynalite itself would drop its in-memory store);
 * - `blackhole()` it (connections are accepted and never answered: the timeouts' case);
 * - `throttle(n)` the next n requests with DynamoDB's own throttling response;
 * - `hold(match)` the requests a test picks (by operation and body) until it releases them: one
 *   instance's write unwritten while the table answers everyone else;
 * - count requests per operation (`calls`), to check what a path costs.
 *
 * Child processes get the same endpoint through `env` (AWS_ENDPOINT_URL_DYNAMODB and friends).
 */
import http from "node:http";
import { createRequire } from "node:module";
import net from "node:net";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { DynamoClientOptions } from "../../lib/registry/dynamo/client.js";
import { createTable } from "../../lib/registry/dynamo/table.js";

// The SDK warns once per process below Node.js 22 (lib/util/aws-sdk-node-warning.ts); the clients
// built here directly would print it into the test output on Node.js 20.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";

interface DynaliteServer extends http.Server {}
const dynalite = createRequire(import.meta.url)("dynalite") as (options: {
  createTableMs: number;
  deleteTableMs: number;
  updateTableMs: number;
}) => DynaliteServer;

const REGION = "us-east-1";
const CREDENTIALS = { accessKeyId: "kgw-test", secretAccessKey: "kgw-test" };

export type ThrottleError = "ThrottlingException" | "ProvisionedThroughputExceededException";

/** Requests held at the front by `hold`, until released. */
export interface HeldRequests {
  /** How many are held now. */
  count(): number;
  /** Sends the held ones on, and lets later matches through. */
  release(): void;
}

export interface LocalDynamo {
  /** http://127.0.0.1:<port>: the front, stable across stop/start. */
  readonly endpoint: string;
  readonly tableName: string;
  /** What a registry or store in this process should be built with. */
  readonly clientOptions: DynamoClientOptions;
  /** The SDK's standard configuration for a child process. */
  readonly env: Readonly<Record<string, string>>;
  /** A client for reaching into the table directly (corrupt items, inspections). */
  readonly client: DynamoDBClient;
  /** Requests that reached the front, by operation (PutItem, Query…), throttled ones included. */
  readonly calls: Map<string, number>;
  /** Closes the port: connections are refused until start(). Data is kept. */
  stop(): Promise<void>;
  /** Listens again on the same port. */
  start(): Promise<void>;
  /** Accepts connections and never answers, until start(). */
  blackhole(): Promise<void>;
  /** Answers the next `n` requests with a throttling error instead of serving them. */
  throttle(n: number, error?: ThrottleError): void;
  /** Holds every request matching `match` (its operation, its JSON body) until released. */
  hold(match: (op: string, body: string) => boolean): HeldRequests;
  /** Another table of the same design in the same server. */
  createTable(name: string): Promise<void>;
  /** Everything down: clients, sockets, dynalite. */
  close(): Promise<void>;
}

let tables = 0;

export async function startLocalDynamo(): Promise<LocalDynamo> {
  const backend = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  await listen(backend, 0);
  const backendPort = (backend.address() as net.AddressInfo).port;
  const agent = new http.Agent({ keepAlive: true });

  const calls = new Map<string, number>();
  let throttled = 0;
  let throttleError: ThrottleError = "ThrottlingException";

  const holds = new Set<{ match: (op: string, body: string) => boolean; waiting: Array<() => void> }>();

  // Bodies are read whole before anything is decided: a hold matches on them (they are small
  // JSON documents).
  const front = http.createServer((req, res) => {
    const op = String(req.headers["x-amz-target"] ?? "").split(".")[1] ?? "?";
    calls.set(op, (calls.get(op) ?? 0) + 1);
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      if (throttled > 0) {
        throttled--;
        res.writeHead(400, { "content-type": "application/x-amz-json-1.0", "x-amzn-requestid": "throttled" });
        res.end(
          JSON.stringify({
            __type: `com.amazonaws.dynamodb.v20120810#${throttleError}`,
            message: "Rate of requests exceeds the allowed throughput (injected by the test).",
          }),
        );
        return;
      }
      const forward = () => {
        const upstream = http.request(
          {
            host: "127.0.0.1",
            port: backendPort,
            method: req.method,
            path: req.url,
            headers: req.headers,
            agent,
          },
          (up) => {
            res.writeHead(up.statusCode ?? 500, up.headers);
            up.pipe(res);
          },
        );
        upstream.on("error", () => res.destroy());
        upstream.end(body);
      };
      const text = body.toString("utf8");
      const hold = [...holds].find((h) => h.match(op, text));
      if (hold) hold.waiting.push(forward);
      else forward();
    });
  });
  await listen(front, 0);
  const port = (front.address() as net.AddressInfo).port;
  const endpoint = `http://127.0.0.1:${port}`;

  let hole: net.Server | undefined;
  const held = new Set<net.Socket>();
  const closeHole = async () => {
    if (!hole) return;
    for (const s of held) s.destroy();
    held.clear();
    await new Promise<void>((r) => hole!.close(() => r()));
    hole = undefined;
  };

  const clientOptions: DynamoClientOptions = { endpoint, region: REGION, credentials: CREDENTIALS };
  const client = new DynamoDBClient(clientOptions);
  const tableName = `kgw-test-${process.pid}-${++tables}`;
  await createTable(client, tableName);

  const stopFront = async () => {
    if (!front.listening) return;
    const closed = new Promise<void>((r) => front.close(() => r()));
    front.closeAllConnections();
    await closed;
  };

  return {
    endpoint,
    tableName,
    clientOptions,
    env: {
      AWS_ENDPOINT_URL_DYNAMODB: endpoint,
      AWS_REGION: REGION,
      AWS_ACCESS_KEY_ID: CREDENTIALS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: CREDENTIALS.secretAccessKey,
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true",
    },
    client,
    calls,
    stop: async () => {
      await closeHole();
      await stopFront();
    },
    start: async () => {
      await closeHole();
      if (!front.listening) await listen(front, port);
    },
    blackhole: async () => {
      await stopFront();
      if (hole) return;
      hole = net.createServer((socket) => {
        held.add(socket);
        socket.on("close", () => held.delete(socket));
        socket.on("error", () => {});
      });
      await listen(hole, port);
    },
    throttle: (n, error = "ThrottlingException") => {
      throttled = n;
      throttleError = error;
    },
    hold: (match) => {
      const h = { match, waiting: [] as Array<() => void> };
      holds.add(h);
      return {
        count: () => h.waiting.length,
        release: () => {
          holds.delete(h);
          for (const send of h.waiting.splice(0)) send();
        },
      };
    },
    createTable: (name) => createTable(client, name),
    close: async () => {
      client.destroy();
      await closeHole();
      await stopFront();
      agent.destroy();
      await new Promise<void>((r) => backend.close(() => r()));
    },
  };
}

function listen(server: net.Server, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
}
