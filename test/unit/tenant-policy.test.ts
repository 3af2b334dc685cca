/**
 * The tenant policy on its own: who a credential makes a peer, which mixes are refused, and how a
 * change in the store (or the clock) closes what a credential had open. Records are built with
 * the same operations `kgw tenant` uses; the watch is a stand-in that serves them.
 */
import { EventEmitter } from "node:events";
import type { PeerCertificate } from "node:tls";
import { afterEach, describe, expect, it, onTestFinished, vi } from "vitest";
import { BadRequestError, CredentialRevokedError, type GatewayError } from "../../lib/errors.js";
import { ServerMetrics } from "../../lib/metrics/server-metrics.js";
import type { CallerCredentials } from "../../lib/server/policy/caller-auth.js";
import { type TenantPolicy, tenantPolicy } from "../../lib/server/policy/tenant-policy.js";
import type { TenantRecord } from "../../lib/tenancy/model.js";
import {
  addAgentCertificate,
  addCallerCertificate,
  addToken,
  createTenantRecord,
  deleteTenantRecord,
  revokeCredential,
} from "../../lib/tenancy/operations.js";
import type { TenantChanges, TenantWatch } from "../../lib/tenancy/store.js";
import { generateToken } from "../../lib/tenancy/tokens.js";
import { captureLogger } from "../helpers/gateway.js";

const T0 = new Date("2026-12-05T10:00:00Z");

class FakeWatch extends EventEmitter implements TenantWatch {
  readonly ready = Promise.resolve();
  readonly records = new Map<string, TenantRecord>();
  get(id: string) {
    return this.records.get(id);
  }
  /** What a poll that saw `record` does. */
  write(record: TenantRecord) {
    this.records.set(record.id, record);
    const changes: TenantChanges = { changed: [record], removed: [] };
    this.emit("change", changes);
  }
  close() {}
}

function tenant(id: string) {
  const agent = generateToken("agent", id);
  const caller = generateToken("caller", id);
  let record = createTenantRecord({ id }, undefined, T0);
  record = addToken(record, "agent-token", agent, T0);
  record = addToken(record, "caller-token", caller, T0);
  record = addCallerCertificate(
    record,
    {
      serial: "1a2b",
      subject: `O=kgw:tenant-caller,CN=${id}`,
      uri: `kgw://tenant/${id}/caller`,
      notAfter: new Date("2027-12-05T10:00:00Z"),
    },
    T0,
  );
  record = addAgentCertificate(
    record,
    {
      serial: "3c4d",
      subject: `O=kgw:tenant-agent,CN=${id}`,
      uri: `kgw://tenant/${id}/agent`,
      notAfter: new Date("2027-12-05T10:00:00Z"),
    },
    T0,
  );
  return { record: { ...record, version: 1 }, agent, caller };
}

/** The same for an agent certificate of `id`. */
const agentCert = (id: string, serial = "3C4D") =>
  ({
    subjectaltname: `URI:kgw://tenant/${id}/agent`,
    serialNumber: serial,
    subject: { CN: id },
  }) as unknown as PeerCertificate;

/** What Node's TLSSocket.getPeerCertificate() gives for a verified caller certificate of `id`. */
const callerCert = (id: string, serial = "1A2B") =>
  ({
    subjectaltname: `URI:kgw://tenant/${id}/caller`,
    serialNumber: serial,
    subject: { CN: id },
  }) as unknown as PeerCertificate;

let policy: TenantPolicy | undefined;
afterEach(() => policy?.close());

function setup(clock: { now: Date } = { now: T0 }, recheckIntervalMs = 60_000) {
  const watch = new FakeWatch();
  const acme = tenant("acme");
  const globex = tenant("globex");
  watch.records.set("acme", acme.record);
  watch.records.set("globex", globex.record);
  const metrics = new ServerMetrics();
  policy = tenantPolicy({
    watch,
    udsTenant: "acme",
    recheckIntervalMs,
    defaultQuotas: {
      maxTunnels: 1000,
      dialsPerSecond: 1000,
      dialBurst: 1000,
      maxAgents: 32,
      maxBufferedMiB: 4096,
    },
    log: captureLogger().log,
    metrics,
    now: () => clock.now,
  });
  return { watch, acme, globex, policy, metrics };
}

const tcp = (over: Partial<CallerCredentials>): CallerCredentials => ({
  listener: "gateway",
  verifiedCertificate: undefined,
  authorization: [],
  ...over,
});

describe("who a credential makes a peer", () => {
  it("an agent token makes an agent of its tenant", () => {
    const { acme, policy } = setup();
    const p = policy.authenticateAgent({ verifiedCertificate: undefined, bearerToken: acme.agent.token });
    expect(p).toMatchObject({ tenant: "acme", identity: `token:${acme.agent.id}` });
  });

  it("a caller token or certificate makes a caller of its tenant", () => {
    const { globex, policy } = setup();
    expect(
      policy.authenticateCaller(tcp({ authorization: [`Bearer ${globex.caller.token}`] })),
    ).toMatchObject({
      tenant: "globex",
      principal: `token:${globex.caller.id}`,
    });
    // The scheme is case-insensitive (RFC 9110).
    expect(policy.authenticateCaller(tcp({ authorization: [`bearer ${globex.caller.token}`] })).tenant).toBe(
      "globex",
    );
    expect(policy.authenticateCaller(tcp({ verifiedCertificate: callerCert("globex") }))).toMatchObject({
      tenant: "globex",
      principal: "cert:globex#1A2B",
    });
  });

  it("the Unix socket's callers are its configured tenant's, while that tenant exists", () => {
    const { watch, acme, policy } = setup();
    expect(
      policy.authenticateCaller({ listener: "uds", verifiedCertificate: undefined, authorization: [] }),
    ).toMatchObject({
      tenant: "acme",
      principal: "uds",
    });
    watch.write(deleteTenantRecord(acme.record, T0));
    expect(() =>
      policy.authenticateCaller({ listener: "uds", verifiedCertificate: undefined, authorization: [] }),
    ).toThrow(/Unix socket's tenant/);
  });
});

describe("what is refused", () => {
  it("the role comes from the credential: an agent token cannot call, a caller token or certificate cannot be an agent", () => {
    const { acme, policy } = setup();
    expect(() => policy.authenticateCaller(tcp({ authorization: [`Bearer ${acme.agent.token}`] }))).toThrow(
      expect.objectContaining({ code: "ERR_UNAUTHENTICATED", reason: "wrong-role" }),
    );
    expect(() =>
      policy.authenticateAgent({ verifiedCertificate: undefined, bearerToken: acme.caller.token }),
    ).toThrow(expect.objectContaining({ reason: "wrong-role" }));
    // A caller's certificate on the connection refuses an agent stream, even beside a valid agent token.
    expect(() =>
      policy.authenticateAgent({ verifiedCertificate: callerCert("acme"), bearerToken: acme.agent.token }),
    ).toThrow(expect.objectContaining({ reason: "wrong-role" }));
  });

  it("one tenant's certificate and another's token together are refused, not resolved", () => {
    const { globex, policy } = setup();
    expect(() =>
      policy.authenticateCaller(
        tcp({ verifiedCertificate: callerCert("acme"), authorization: [`Bearer ${globex.caller.token}`] }),
      ),
    ).toThrow(/different tenants/);
  });

  it("no credential is 407 on CONNECT; other schemes, and two headers, are refused", () => {
    const { policy } = setup();
    expect(() => policy.authenticateCaller(tcp({}))).toThrow(
      expect.objectContaining({ code: "ERR_PROXY_AUTH_REQUIRED" }),
    );
    expect(() => policy.authenticateCaller(tcp({ authorization: ["Basic dXNlcjpwYXNz"] }))).toThrow(
      expect.objectContaining({ code: "ERR_PROXY_AUTH_REQUIRED" }),
    );
    expect(() => policy.authenticateCaller(tcp({ authorization: ["Bearer a", "Bearer b"] }))).toThrow(
      BadRequestError,
    );
    expect(() =>
      policy.authenticateAgent({ verifiedCertificate: undefined, bearerToken: undefined }),
    ).toThrow(/agent token/);
  });

  it("a certificate whose serial the tenant does not list is refused", () => {
    const { policy } = setup();
    expect(() => policy.authenticateCaller(tcp({ verifiedCertificate: callerCert("acme", "FFFF") }))).toThrow(
      expect.objectContaining({ reason: "unknown-credential" }),
    );
  });
});

describe("what a credential opened is closed when the credential goes", () => {
  function open(p: TenantPolicy, credential: Parameters<TenantPolicy["hold"]>[0]) {
    const closed: GatewayError[] = [];
    const release = p.hold(credential, (err) => closed.push(err));
    return { closed, release };
  }

  it("revoking a caller token closes its tunnels at the next change, and nobody else's", async () => {
    const { watch, acme, globex, policy, metrics } = setup();
    const byToken = policy.authenticateCaller(tcp({ authorization: [`Bearer ${acme.caller.token}`] }));
    const byCert = policy.authenticateCaller(tcp({ verifiedCertificate: callerCert("acme") }));
    const other = policy.authenticateCaller(tcp({ authorization: [`Bearer ${globex.caller.token}`] }));
    const a = open(policy, byToken.credential);
    const a2 = open(policy, byToken.credential);
    const b = open(policy, byCert.credential);
    const c = open(policy, other.credential);
    expect(policy.live).toMatchObject({ credentials: 3, holders: 4 });

    watch.write(revokeCredential(acme.record, acme.caller.id, T0));
    expect(a.closed).toHaveLength(1);
    expect(a.closed[0]).toBeInstanceOf(CredentialRevokedError);
    expect(a2.closed).toHaveLength(1);
    expect(b.closed).toEqual([]);
    expect(c.closed).toEqual([]);
    expect(policy.live).toMatchObject({ credentials: 2, holders: 2 });
    expect(await metrics.registry.getSingleMetricAsString("kgw_server_revoked_streams_total")).toContain(
      'kgw_server_revoked_streams_total{role="caller"} 2',
    );
  });

  it("deleting a tenant closes its agents and callers", () => {
    const { watch, acme, policy } = setup();
    const agent = policy.authenticateAgent({ verifiedCertificate: undefined, bearerToken: acme.agent.token });
    const caller = policy.authenticateCaller(tcp({ verifiedCertificate: callerCert("acme") }));
    const uds = policy.authenticateCaller({
      listener: "uds",
      verifiedCertificate: undefined,
      authorization: [],
    });
    const held = [
      open(policy, agent.credential),
      open(policy, caller.credential),
      open(policy, uds.credential),
    ];
    watch.write(deleteTenantRecord(acme.record, T0));
    expect(held.map((h) => h.closed.length)).toEqual([1, 1, 1]);
  });

  it("a credential whose grace period runs out is closed by the clock alone", async () => {
    // The recheck's interval on fake timers, the policy's clock injected: no time really passes.
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    onTestFinished(() => {
      vi.useRealTimers();
    });
    const clock = { now: T0 };
    const { watch, acme, policy } = setup(clock, 20);
    // Rotated out: usable for one more hour.
    watch.records.set("acme", {
      ...acme.record,
      version: 2,
      agentTokens: acme.record.agentTokens.map((t) => ({ ...t, expiresAt: "2026-12-05T11:00:00.000Z" })),
    });
    const agent = policy.authenticateAgent({ verifiedCertificate: undefined, bearerToken: acme.agent.token });
    const h = open(policy, agent.credential);
    // Three rechecks within the grace period: still open.
    await vi.advanceTimersByTimeAsync(3 * 20);
    expect(h.closed).toEqual([]);
    // Past it, the next recheck closes it, with no change from the store.
    clock.now = new Date("2026-12-05T11:00:01Z");
    await vi.advanceTimersByTimeAsync(19);
    expect(h.closed).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(h.closed).toHaveLength(1);
  });

  it("a caller and an agent that showed a certificate and a token are closed when either is revoked", async () => {
    for (const first of ["certificate", "token"] as const) {
      const { watch, acme, policy, metrics } = setup();
      const caller = policy.authenticateCaller(
        tcp({ verifiedCertificate: callerCert("acme"), authorization: [`Bearer ${acme.caller.token}`] }),
      );
      const agent = policy.authenticateAgent({
        verifiedCertificate: agentCert("acme"),
        bearerToken: acme.agent.token,
      });
      const held = [open(policy, caller.credential), open(policy, agent.credential)];
      const revoke = first === "certificate" ? ["1a2b", "3c4d"] : [acme.caller.id, acme.agent.id];
      let record = acme.record;
      for (const id of revoke) record = revokeCredential(record, id, T0);
      watch.write(record);
      // Each closed once, with the reason, though it was held under both of its credentials.
      expect(held.map((h) => h.closed.map((e) => e.message))).toEqual([
        [expect.stringContaining("(revoked)")],
        [expect.stringContaining("(revoked)")],
      ]);
      expect(await metrics.registry.getSingleMetricAsString("kgw_server_revoked_streams_total")).toMatch(
        /role="caller"\} 1\n.*role="agent"\} 1|role="agent"\} 1\n.*role="caller"\} 1/s,
      );
      for (const h of held) h.release();
      expect(policy.live).toMatchObject({ credentials: 0, holders: 0 });
      policy.close();
    }
  });

  it("a tenant deleted under a peer that showed both is closed and counted once", async () => {
    const { watch, acme, policy, metrics } = setup();
    const caller = policy.authenticateCaller(
      tcp({ verifiedCertificate: callerCert("acme"), authorization: [`Bearer ${acme.caller.token}`] }),
    );
    const h = open(policy, caller.credential);
    watch.write(deleteTenantRecord(acme.record, T0));
    expect(h.closed).toHaveLength(1);
    expect(await metrics.registry.getSingleMetricAsString("kgw_server_revoked_streams_total")).toContain(
      'kgw_server_revoked_streams_total{role="caller"} 1',
    );
    expect(policy.live).toMatchObject({ credentials: 0, holders: 0 });
  });

  it("a deleted tenant's streams are told so", () => {
    const { watch, acme, policy } = setup();
    const caller = policy.authenticateCaller(tcp({ verifiedCertificate: callerCert("acme") }));
    const h = open(policy, caller.credential);
    watch.write(deleteTenantRecord(acme.record, T0));
    expect(h.closed[0]).toMatchObject({ code: "ERR_UNAUTHENTICATED", reason: "tenant-deleted" });
    expect(h.closed[0]!.message).toContain("(tenant-deleted)");
  });

  it("a released stream is not closed later, and the drop-in's credentials hold nothing", () => {
    const { watch, acme, policy } = setup();
    const agent = policy.authenticateAgent({ verifiedCertificate: undefined, bearerToken: acme.agent.token });
    const h = open(policy, agent.credential);
    h.release();
    watch.write(revokeCredential(acme.record, acme.agent.id, T0));
    expect(h.closed).toEqual([]);
    expect(open(policy, undefined).closed).toEqual([]);
    expect(policy.live).toMatchObject({ credentials: 0, holders: 0 });
  });
});
