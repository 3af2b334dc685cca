/**
 * The peer link's pieces without sockets: the DIAL_RSP extension on the wire, the caller context
 * in metadata, typed failures, the client dial's state machine over a fake call, and the peer
 * flags. The peer identity in certificates: kgw-uri.test.ts.
 */
import { EventEmitter } from "node:events";
import { describe, expect, it } from "vitest";
import { parseServerOptions } from "../../lib/config/server-options.js";
import {
  ConnectionBrokenError,
  DrainedError,
  PeerNotHereError,
  PeerUnavailableError,
} from "../../lib/errors.js";
import { parsePeerContext, peerContextHeaders } from "../../lib/fleet/peer/peer-context.js";
import { PeerDial, type PeerDialOutcome } from "../../lib/fleet/peer/peer-dial.js";
import { NOT_HERE, peerDialFailure, tunnelEndFailure } from "../../lib/fleet/peer/peer-outcome.js";
import { decodePacket, encodePacket } from "../../lib/proto/codec.js";
import { closeResponse, dialResponse, type Packet, PacketType } from "../../lib/proto/packet.js";
import type { FrontendEnd } from "../../lib/tunnel/endpoints.js";
import { waitFor } from "../helpers/agent.js";

describe("DialResponse.failure (field 100)", () => {
  it("round-trips, and is absent from the bytes when not set", () => {
    const plain = dialResponse(7n, 0n, "no agent");
    const typed = { ...plain, failure: NOT_HERE };
    expect(decodePacket(encodePacket(typed))).toEqual(typed);
    expect(decodePacket(encodePacket(plain))).toEqual(plain);
    expect(encodePacket(typed).subarray(0, 2)).toEqual(encodePacket(plain).subarray(0, 2));
    expect(encodePacket(typed).length).toBe(encodePacket(plain).length + 3 + NOT_HERE.length);
  });
});

describe("CloseResponse.failure (field 100)", () => {
  it("round-trips, and is absent from the bytes when not set (what upstream peers see)", () => {
    const plain = closeResponse(1n, "drained");
    const typed = closeResponse(1n, "drained", "ERR_DRAINED");
    expect(decodePacket(encodePacket(typed))).toEqual(typed);
    expect(decodePacket(encodePacket(plain))).toEqual(plain);
    expect(plain).not.toHaveProperty("failure");
    expect(encodePacket(typed).length).toBe(encodePacket(plain).length + 3 + "ERR_DRAINED".length);
  });

  it("is sent for a drain only", () => {
    expect(tunnelEndFailure(new DrainedError("drained"))).toBe("ERR_DRAINED");
    expect(tunnelEndFailure(new ConnectionBrokenError("broke"))).toBeUndefined();
    expect(tunnelEndFailure(undefined)).toBeUndefined();
  });
});

describe("DialResponse.agent (field 101)", () => {
  it("round-trips beside failure, and is absent from the bytes when not set", () => {
    const plain = dialResponse(1n, 1n);
    const named = { ...plain, agent: "acme-agent" };
    expect(decodePacket(encodePacket(named))).toEqual(named);
    expect(encodePacket(named).length).toBe(encodePacket(plain).length + 3 + "acme-agent".length);
    const failed = { ...dialResponse(1n, 0n, "refused"), failure: "ERR_DIAL_FAILED", agent: "a" };
    expect(decodePacket(encodePacket(failed))).toEqual(failed);
  });
});

describe("the caller's context in metadata", () => {
  const caller = { tenant: "acme", principal: "cert:kube apiserver, ü#0a", listener: "gateway" } as const;

  it("round-trips any principal", () => {
    const headers = peerContextHeaders(caller, "connect", "gw a/1");
    expect(parsePeerContext(headers)).toEqual({ caller, frontend: "connect", origin: "gw a/1" });
  });

  it("carries the dial's id when there is one", () => {
    const id = "2f1c9a4e-7b1d-4c3e-9a7f-0d5e6b8c1a2f";
    expect(parsePeerContext(peerContextHeaders(caller, "grpc", "gw-a", id))).toEqual({
      caller,
      frontend: "grpc",
      origin: "gw-a",
      dialId: id,
    });
  });

  it.each([
    ["kgw-peer-tenant", undefined],
    ["kgw-peer-tenant", "Acme"],
    ["kgw-peer-tenant", "acme, globex"],
    ["kgw-peer-frontend", "grpc, connect"],
    ["kgw-peer-listener", "admin"],
    ["kgw-peer-principal", "%E0%A4%A"],
    ["kgw-peer-principal", "a%0Db"],
    ["kgw-peer-principal", "a b"],
    ["kgw-peer-origin", "x".repeat(5000)],
    ["kgw-peer-dial", "x".repeat(65)],
    ["kgw-peer-dial", "a%0Ab"],
    ["kgw-peer-dial", ""],
  ])("refuses %s = %j", (name, value) => {
    const headers: Record<string, string | undefined> = peerContextHeaders(caller, "grpc", "gw-a");
    headers[name] = value;
    const parsed = parsePeerContext(headers);
    expect(parsed).toHaveProperty("problem");
    expect((parsed as { problem: string }).problem).toContain(name);
  });
});

describe("typed failures from the owner", () => {
  it("not-here, draining, a code, and an older peer's free text", () => {
    expect(peerDialFailure("b", "no agent connected for acme", NOT_HERE)).toBeInstanceOf(PeerNotHereError);
    expect(peerDialFailure("b", "gateway is shutting down", "ERR_SHUTTING_DOWN")).toBeInstanceOf(
      PeerUnavailableError,
    );
    expect(peerDialFailure("b", "quota", "ERR_QUOTA").code).toBe("ERR_QUOTA");
    expect(peerDialFailure("b", "x", "ERR_CONFIG").code).toBe("ERR_DIAL_FAILED");
    expect(peerDialFailure("b", "dial tcp: i/o timeout", undefined).code).toBe("ERR_DIAL_TIMEOUT");
  });
});

/** A call that records what the dial writes; the test plays the owner. */
class FakeCall extends EventEmitter {
  written: Packet[] = [];
  ended = false;
  destroyedCalls = 0;
  status = null;
  writableNeedDrain = false;
  writableEnded = false;
  destroyed = false;
  write(p: Packet): boolean {
    this.written.push(p);
    return true;
  }
  end(): void {
    this.ended = true;
  }
  destroy(): void {
    this.destroyedCalls++;
  }
  pause(): void {}
  resume(): void {}
}

function harness(dialTimeoutMs = 0) {
  const call = new FakeCall();
  const events: string[] = [];
  const outcomes: PeerDialOutcome[] = [];
  const errors: unknown[] = [];
  const frontend: FrontendEnd = {
    established: () => events.push("established"),
    dialFailed: (err) => {
      events.push("dialFailed");
      errors.push(err);
    },
    deliver: (_d, flushed) => {
      flushed?.();
      return true;
    },
    onceWritable: (cb) => cb(),
    closed: (err) => {
      events.push(err ? "broken" : "closed");
      errors.push(err);
    },
  };
  const dial = new PeerDial(call, frontend, {
    peer: "gw-b",
    dialTimeoutMs,
    linkLost: () => null,
    outcome: (o) => outcomes.push(o),
  });
  dial.start({ protocol: "tcp", address: "10.0.0.1:443" });
  return { call, dial, events, outcomes, errors };
}

describe("a forwarded dial, client end", () => {
  it("cancel before the answer sends DIAL_CLS and ends the call", () => {
    const h = harness();
    h.dial.cancel();
    expect(h.call.written.map((p) => p.type)).toEqual([PacketType.DIAL_REQ, PacketType.DIAL_CLS]);
    expect(h.call.ended).toBe(true);
    expect(h.outcomes).toEqual(["cancelled"]);
    expect(h.events).toEqual([]);
  });

  it("a call that ends after the dial was answered is a broken tunnel, never a clean close", () => {
    const h = harness();
    h.call.emit("data", dialResponse(1n, 1n));
    h.call.emit("close");
    expect(h.events).toEqual(["established", "broken"]);
    expect(h.errors[0]).toBeInstanceOf(ConnectionBrokenError);
  });

  it("a clean CLOSE_RSP closes cleanly; one with an error breaks", () => {
    const clean = harness();
    clean.call.emit("data", dialResponse(1n, 1n));
    clean.call.emit("data", closeResponse(1n));
    clean.call.emit("close");
    expect(clean.events).toEqual(["established", "closed"]);
    const broken = harness();
    broken.call.emit("data", dialResponse(1n, 1n));
    broken.call.emit("data", closeResponse(1n, "agent acme-1 disconnected"));
    expect(broken.events).toEqual(["established", "broken"]);
  });

  it("a CLOSE_RSP saying a drain cut the tunnel at the owner ends it as drained, not broken", () => {
    const drained = harness();
    drained.call.emit("data", dialResponse(1n, 1n));
    drained.call.emit(
      "data",
      closeResponse(1n, "the gateway's drain ended with the tunnel open", "ERR_DRAINED"),
    );
    expect(drained.errors[0]).toMatchObject({ code: "ERR_DRAINED" });
    // Any other failure an owner may send is a break, never trusted as some other code.
    const other = harness();
    other.call.emit("data", dialResponse(1n, 1n));
    other.call.emit("data", closeResponse(1n, "agent acme-1 disconnected", "ERR_AGENT_GONE"));
    expect(other.errors[0]).toBeInstanceOf(ConnectionBrokenError);
  });

  it("a call that ends before the answer is PeerUnavailable; a typed answer keeps its type", () => {
    const lost = harness();
    lost.call.emit("close");
    expect(lost.errors[0]).toBeInstanceOf(PeerUnavailableError);
    const notHere = harness();
    notHere.call.emit("data", { ...dialResponse(1n, 0n, "no agent connected for acme"), failure: NOT_HERE });
    expect(notHere.errors[0]).toBeInstanceOf(PeerNotHereError);
    expect(notHere.outcomes).toEqual(["not_here"]);
  });

  it("times out with DIAL_CLS", async () => {
    const h = harness(20);
    await waitFor(() => h.events.length > 0, 2000, "timeout");
    expect(h.errors[0]).toMatchObject({ code: "ERR_DIAL_TIMEOUT" });
    expect(h.call.written.at(-1)?.type).toBe(PacketType.DIAL_CLS);
    expect(h.outcomes).toEqual(["timeout"]);
  });
});

describe("peer flags", () => {
  const base = ["--cluster-cert=c", "--cluster-key=k", "--agent-token=t0123456789", "--uds-name=/tmp/x.sock"];
  const parse = (flags: string[]) => parseServerOptions([...base, ...flags], {});

  it("off by default; on with all three TLS files", () => {
    expect(parse([])).toMatchObject({ options: { peer: null } });
    expect(
      parse(["--peer-port=8135", "--peer-cert=p.pem", "--peer-key=p-key.pem", "--peer-ca-cert=ca.pem"]),
    ).toMatchObject({
      options: { peer: { port: 8135, host: "", tls: { cert: "p.pem", key: "p-key.pem", ca: "ca.pem" } } },
    });
  });

  it("refuses a peer port without mTLS, and peer files without a port", () => {
    expect(() => parse(["--peer-port=8135", "--peer-cert=p.pem", "--peer-key=k"])).toThrow(/--peer-ca-cert/);
    expect(() => parse(["--peer-cert=p.pem"])).toThrow(/needs --peer-port/);
  });
});
