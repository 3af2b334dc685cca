/**
 * The install route under a flood of well-formed bogus links from one source: each costs a read
 * of the tenant store, and while the store is slow they hold the route's slots. The flood must
 * not keep a real fetch from another source out. The route runs on its real head parser over
 * TCP on loopback; the store is a real file store whose reads of the flooded tenant are held
 * until the test lets them go, which is what a slow store does, without a clock in the test.
 */
import { type AddressInfo, createServer, connect as netConnect, type Server } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ServerMetrics } from "../../lib/metrics/server-metrics.js";
import { refusalLog } from "../../lib/observability/refusal-log.js";
import {
  createInstallRoute,
  MAX_INSTALL_IN_FLIGHT,
  MAX_INSTALL_IN_FLIGHT_PER_SOURCE,
} from "../../lib/server/install/install-route.js";
import { openFileTenantStore } from "../../lib/tenancy/file-store/file-tenant-store.js";
import type { TenantStore } from "../../lib/tenancy/store.js";
import { generateToken } from "../../lib/tenancy/tokens.js";
import { acceptFrontendConnection } from "../../lib/transport/frontend-connection.js";
import { waitFor } from "../helpers/agent.js";
import { captureLogger } from "../helpers/gateway.js";
import { getTestPki } from "../helpers/pki.js";
import { expectNoLeakedResources, activeResources as resources } from "../helpers/resources.js";
import { makeTenantStore, type TestTenantStore } from "../helpers/tenants.js";

/** The flooded tenant: its record is read, slowly, for every bogus link. */
const FLOODED = "bogus";
const FLOOD = 60;

let store: TestTenantStore;
let files: TenantStore;
let server: Server;
let baseline: Map<string, number>;
const metrics = new ServerMetrics();
const { log, lines } = captureLogger();
/** Reads of the flooded tenant's record, held until released. */
const held: Array<() => void> = [];

beforeAll(async () => {
  baseline = resources();
  store = makeTenantStore(await getTestPki());
  await store.create("acme");
  files = await openFileTenantStore(store.dir);
  // The real store, with reads of the flooded tenant held: a store that has become slow.
  const slow = new Proxy(files, {
    get(target, key, receiver) {
      if (key !== "get") return Reflect.get(target, key, receiver);
      return async (id: string) => {
        if (id === FLOODED) await new Promise<void>((resolve) => held.push(resolve));
        return target.get(id);
      };
    },
  });
  const route = createInstallRoute({
    store: slow,
    render: (tenantId, agentToken) => `tenant: ${tenantId}\ntoken: ${agentToken}\n`,
    log,
    metrics,
  });
  const refusals = refusalLog(log);
  server = createServer((socket) =>
    acceptFrontendConnection(socket, {
      listener: "install",
      maxHeaderBytes: 16 * 1024,
      headerTimeoutMs: 10_000,
      log,
      refusals,
      metrics,
      onGrpc: (connection) => connection.destroy(),
      onConnect: (socket) => socket.destroy(),
      onGet: route,
    }),
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
});

afterAll(async () => {
  for (const release of held.splice(0)) release();
  await new Promise((resolve) => server?.close(resolve));
  await files?.close();
  store?.remove();
  await expectNoLeakedResources(baseline);
});

interface Answer {
  status: number;
  head: string;
}

/** GET `path` from the source address `from`; the answer once the route has closed. */
function fetchFrom(from: string, path: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const { port } = server.address() as AddressInfo;
    const s = netConnect({ host: "127.0.0.1", port, localAddress: from });
    let got = "";
    s.on("connect", () => s.write(`GET ${path} HTTP/1.1\r\nHost: gw\r\n\r\n`));
    s.on("data", (c: Buffer) => {
      got += c.toString("latin1");
    });
    s.on("error", reject);
    s.on("close", () =>
      resolve({
        status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(got)?.[1] ?? 0),
        head: got.split("\r\n\r\n")[0]!,
      }),
    );
  });
}

const outcomes = async () =>
  Object.fromEntries((await metrics.installRequests.get()).values.map((v) => [v.labels.outcome, v.value]));

describe("a flood of bogus install links from one source", () => {
  it("does not keep a real fetch from another source out", async () => {
    const issued = (await store.run(["install-token", "acme", "--gateway-address=gw.example:8132"])) as {
      installToken: { token: string };
    };
    const bogus = () => `/v1/install/${generateToken("install", FLOODED).token}.yaml`;

    // The flood, from 127.0.0.2: every link well-formed, every one a read of the slow store.
    const answered: Answer[] = [];
    const flood = Array.from({ length: FLOOD }, () =>
      fetchFrom("127.0.0.2", bogus()).then((a) => {
        answered.push(a);
        return a;
      }),
    );
    // Each bogus fetch is either holding a slot (its read held) or already answered.
    await waitFor(() => held.length + answered.length === FLOOD, 5000, "the flood in flight or refused");

    // A real fetch from another source is served while the flood's reads are still held.
    const real = await fetchFrom("127.0.0.1", `/v1/install/${issued.installToken.token}.yaml`);
    expect(real.status).toBe(200);

    // The flood's source holds its share of slots; the rest were told to come back later.
    expect(MAX_INSTALL_IN_FLIGHT_PER_SOURCE).toBeLessThan(MAX_INSTALL_IN_FLIGHT);
    expect(held.length).toBe(MAX_INSTALL_IN_FLIGHT_PER_SOURCE);
    expect(answered.length).toBe(FLOOD - MAX_INSTALL_IN_FLIGHT_PER_SOURCE);
    expect(answered.every((a) => a.status === 429 && /\r\nRetry-After: 1\r\n/.test(a.head))).toBe(true);

    for (const release of held.splice(0)) release();
    const all = await Promise.all(flood);
    expect(all.filter((a) => a.status === 404)).toHaveLength(MAX_INSTALL_IN_FLIGHT_PER_SOURCE);
    expect(await outcomes()).toMatchObject({
      ok: 1,
      throttled: FLOOD - MAX_INSTALL_IN_FLIGHT_PER_SOURCE,
      not_found: MAX_INSTALL_IN_FLIGHT_PER_SOURCE,
    });
    // Logged (within the refusal budget), naming the source, never a link.
    const throttledLines = lines.filter((l) => l.includes('"outcome":"throttled"'));
    expect(throttledLines.length).toBeGreaterThan(0);
    expect(throttledLines[0]).toContain('"source":"127.0.0.2"');
    expect(lines.join("\n")).not.toContain(issued.installToken.token.slice(-64));
  });
});
