/**
 * The benchmark's DynamoDB: dynalite (in memory) in a process of its own, so that the fleet's
 * registry traffic costs the measuring client nothing.
 *   dynalite-main.ts --table=NAME
 * Creates the table of lib/registry/dynamo/table.ts and prints {"port":N} once it serves.
 */
import { createRequire } from "node:module";
import type { Server } from "node:net";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { createTable } from "../../lib/registry/dynamo/table.js";
import { BENCH_CREDENTIALS, BENCH_REGION } from "./local-aws.js";

const table = process.argv.find((a) => a.startsWith("--table="))?.slice("--table=".length);
if (!table) throw new Error("--table=NAME is required");

const dynalite = createRequire(import.meta.url)("dynalite") as (o: Record<string, number>) => Server;
const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
server.listen(0, "127.0.0.1", async () => {
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no TCP address");
  const client = new DynamoDBClient({
    endpoint: `http://127.0.0.1:${address.port}`,
    region: BENCH_REGION,
    credentials: BENCH_CREDENTIALS,
  });
  await createTable(client, table);
  client.destroy();
  process.stdout.write(`${JSON.stringify({ port: address.port })}\n`);
});
for (const signal of ["SIGTERM", "SIGINT"] as const) process.once(signal, () => process.exit(0));
