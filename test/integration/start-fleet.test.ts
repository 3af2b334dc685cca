/**
 * A hosted server's start-up (lib/fleet/start-fleet.ts): joining the fleet and opening the tenant
 * store both wait on a first read of DynamoDB, and neither needs the other, so the second is not
 * held up by the first (docs/PERFORMANCE.md, `startup`). When the tenant store cannot be opened,
 * the server does not start, and nothing the join started is left running.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseServerOptions, type ServerOptions } from "../../lib/config/server-options.js";
import { startFleet } from "../../lib/fleet/start-fleet.js";
import { ServerMetrics } from "../../lib/metrics/server-metrics.js";
import { createLogger } from "../../lib/observability/logger.js";
import { type LocalDynamo, startLocalDynamo } from "../helpers/dynalite.js";
import { getPeerPki, peerFlags } from "../helpers/peer.js";
import { getTestPki } from "../helpers/pki.js";
import { activeResources, expectNoLeakedResources } from "../helpers/resources.js";

let dynamo: LocalDynamo;
let opts: ServerOptions;
let baseline: Map<string, number>;
const log = createLogger({ name: "start-fleet-test", level: "silent" });

beforeAll(async () => {
  const pki = await getTestPki();
  const peer = await getPeerPki(pki);
  baseline = activeResources();
  dynamo = await startLocalDynamo();
  const parsed = parseServerOptions(
    [
      "--server-id=start-fleet-1",
      `--registry-table=${dynamo.tableName}`,
      `--tenant-ca-cert=${pki.files.caCert}`,
      `--cluster-cert=${pki.files.serverCert}`,
      `--cluster-key=${pki.files.serverKey}`,
      ...peerFlags(pki, peer),
      "--peer-advertise-address=127.0.0.1:8135",
    ],
    {},
  );
  if (parsed.help) throw new Error("unexpected --help");
  opts = parsed.options;
});
afterAll(async () => {
  await dynamo?.close();
  await expectNoLeakedResources(baseline);
});

/** Requests that have reached DynamoDB so far, every operation. */
const requests = () => [...dynamo.calls.values()].reduce((a, b) => a + b, 0);

describe("a hosted server's start", () => {
  it("opens the tenant store while the fleet joins, not after the join's first read", async () => {
    const before = requests();
    let seenWhenOpened = -1;
    let closed = false;
    const started = await startFleet(
      opts,
      { log, metrics: new ServerMetrics(), dynamo: dynamo.clientOptions },
      async () => {
        seenWhenOpened = requests() - before;
        return {
          close: () => {
            closed = true;
          },
        };
      },
    );
    try {
      expect(seenWhenOpened).toBe(0);
      // The join did read the registry, and what was opened beside it is handed over open.
      expect(requests() - before).toBeGreaterThan(0);
      expect(closed).toBe(false);
    } finally {
      await started.fleet.stop(0);
      started.client.destroy();
    }
  });

  it("a tenant store that cannot be opened fails the start, and the joined fleet is stopped", async () => {
    // What the suite's own DynamoDB holds open: it stays up until afterAll.
    const held = activeResources();
    await expect(
      startFleet(opts, { log, metrics: new ServerMetrics(), dynamo: dynamo.clientOptions }, async () => {
        throw new Error("--registry-table: cannot read the tenants");
      }),
    ).rejects.toThrow("cannot read the tenants");
    // The fleet's heartbeat, sweeper and instance reads, and the client's sockets, are gone.
    await expectNoLeakedResources(held);
  });
});
