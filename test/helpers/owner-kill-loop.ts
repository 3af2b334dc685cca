/**
 * Kills a tenant's owner instance over and over under forwarded transfers, and records how every
 * transfer ended at its caller: the loop behind issue 22's item 1 (a CONNECT caller reading a
 * clean end of a tunnel that broke over a peer hop). Used by the CI-sized test
 * (test/system/peer-hop-truncation.test.ts) and by the stress run outside CI
 * (scripts/owner-kill-loop.ts).
 *
 * The owner is a real `kgw server` process (kgw-process.ts) with our agent and a peer port; the
 * forwarding instance runs in this process (peer.ts) and sends every dial to the owner over a
 * peer link, as routing does for a tenant whose agent is elsewhere. The callers run in this
 * process too, so they share its event loop with the forwarding instance: a caller is often
 * behind on reading when its tunnel breaks, the case that matters (kube-apiserver relaying a
 * log to a slow client). Some callers stop reading on purpose before the kill, which makes that
 * case certain rather than likely.
 *
 * Every round: start the owner, open the transfers (endless downloads) at the forwarding
 * instance, wait until each has data flowing, kill -9 the owner, wait until the forwarding
 * instance has ended every tunnel, let the paused callers read again, and record each end.
 */
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { credentials } from "@grpc/grpc-js";
import type { RunningAgent } from "../../lib/agent/agent.js";
import { TunnelClient } from "../../lib/client/tunnel-client.js";
import type { PeerInstance, PeerLinks } from "../../lib/fleet/peer/peer-links.js";
import type { DialContext } from "../../lib/server/core/dial-context.js";
import { startTestAgent, waitFor } from "./agent.js";
import { closedPort, startHttpBackend } from "./backends.js";
import { connectThrough } from "./connect-client.js";
import { gatewayFlags } from "./gateway.js";
import { type KgwProcess, spawnKgw } from "./kgw-process.js";
import { forwardEverything, getPeerPki, peerFlags, startFleetGateway, testPeerLinks } from "./peer.js";
import { recordingEnd } from "./peer-frontend.js";
import { getTestPki } from "./pki.js";

/** Bytes each transfer must have received before the kill: data is flowing, windows are open. */
const FLOWING_BYTES = 256 * 1024;
/** A transfer not ended this long after its tunnel broke at the forwarding instance is "hung". */
const END_WAIT_MS = 15_000;
/** An endless body (HTTP/1.0, no length): only the transport can tell a cut-off from the end. */
const ENDLESS = "GET /stream?n=1000000000000 HTTP/1.0\r\n\r\n";

export interface KillLoopOptions {
  /** Rounds, one kill -9 of the owner each. */
  kills: number;
  /** CONNECT callers per round, of which `pausedCallers` stop reading before the kill. */
  connectCallers: number;
  pausedCallers: number;
  /** gRPC (ProxyService) callers per round. */
  grpcCallers: number;
  /** No new round starts after this (ms since the loop started); the rounds run stay counted. */
  budgetMs?: number;
  /** Told of each round as it ends. */
  onRound?: (round: number, transfers: TransferEnd[]) => void;
}

export interface TransferEnd {
  round: number;
  frontend: "connect" | "grpc";
  /** The caller had stopped reading before the kill and read again after the break. */
  paused: boolean;
  /** "end": a clean end of stream (the defect); "error": an error, with its code; "hung": neither. */
  how: "end" | "error" | "hung";
  code?: string;
  bytes: number;
  /** When the caller saw the end, after the kill. */
  msAfterKill: number;
}

export interface KillLoopResult {
  kills: number;
  transfers: TransferEnd[];
}

/** Runs the loop; everything it started is stopped before it resolves. */
export async function runOwnerKillLoop(opts: KillLoopOptions): Promise<KillLoopResult> {
  const world = await startWorld();
  const transfers: TransferEnd[] = [];
  const started = Date.now();
  let kills = 0;
  try {
    for (let round = 0; round < opts.kills; round++) {
      if (opts.budgetMs !== undefined && Date.now() - started > opts.budgetMs) break;
      const ends = await world.round(round, opts);
      kills++;
      transfers.push(...ends);
      opts.onRound?.(round, ends);
    }
  } finally {
    await world.stop();
  }
  return { kills, transfers };
}

interface World {
  round(round: number, opts: KillLoopOptions): Promise<TransferEnd[]>;
  stop(): Promise<void>;
}

async function startWorld(): Promise<World> {
  const pki = await getTestPki();
  const peerPki = await getPeerPki(pki);
  const backend = await startHttpBackend();
  const peerPort = await closedPort();
  const agentPort = await closedPort();
  const ownerId = "gw-owner-process";
  const owner: PeerInstance = { id: ownerId, host: "127.0.0.1", port: peerPort };
  let links: PeerLinks | undefined;
  const forwarder = await startFleetGateway([...gatewayFlags(pki), "--server-id=gw-forwarder"], {
    directory: forwardEverything(
      () => links!,
      () => owner,
    ),
  });
  // A short failing mark: the next round's owner is back within a second or two.
  links = testPeerLinks(pki, peerPki, {
    log: forwarder.log,
    metrics: forwarder.gw.metrics,
    timings: { failureBackoffMs: 100 },
  });
  const grpc = new TunnelClient(
    `127.0.0.1:${forwarder.gw.addresses.frontend!.port}`,
    credentials.createSsl(
      Buffer.from(pki.ca.certPem),
      Buffer.from(pki.frontend.keyPem),
      Buffer.from(pki.frontend.certPem),
    ),
    { "grpc.ssl_target_name_override": "localhost" },
  );
  const ownerArgs = [
    "server",
    ...gatewayFlags(pki).map((f) => (f === "--agent-port=0" ? `--agent-port=${agentPort}` : f)),
    ...peerFlags(pki, peerPki).filter((f) => !f.startsWith("--peer-port")),
    `--peer-port=${peerPort}`,
    `--server-id=${ownerId}`,
  ];
  let agent: RunningAgent | undefined;
  let current: KgwProcess | undefined;
  const open = new Set<Duplex>();

  const serves = async (): Promise<boolean> => {
    const d = recordingEnd();
    try {
      links!.dial(owner, CONTEXT, { protocol: "tcp", address: backend.address }, d.end);
    } catch {
      return false; // still marked failing from the last round
    }
    const { link } = await d.outcome;
    link?.close();
    return link !== undefined;
  };

  return {
    async round(round, opts) {
      const proc = spawnKgw(ownerArgs);
      current = proc;
      await waitFor(
        () => proc.output.join("").includes("gateway listening"),
        30_000,
        "owner listening",
      ).catch((err: Error) => {
        throw new Error(`${err.message}: ${proc.output.join("").slice(-2000)}`);
      });
      // The agent dials the owner's fixed agent port, and comes back to each new owner by itself.
      if (!agent) ({ agent } = await startTestAgent(pki, agentPort));
      await waitFor(serves, 20_000, "the owner serves dials");

      const callers: Caller[] = [];
      for (let i = 0; i < opts.connectCallers; i++) {
        const c = await connectThrough(
          { kind: "tls", host: "127.0.0.1", port: forwarder.gw.addresses.frontend!.port, pki },
          backend.address,
        );
        if (c.status !== 200) throw new Error(`CONNECT answered ${c.status}`);
        callers.push(watch(c.socket, "connect", i < opts.pausedCallers));
      }
      for (let i = 0; i < opts.grpcCallers; i++) {
        callers.push(watch(await grpc.dial(backend.address), "grpc", false));
      }
      for (const c of callers) {
        open.add(c.stream);
        c.stream.write(ENDLESS);
      }
      await waitFor(() => callers.every((c) => c.bytes() >= FLOWING_BYTES), 20_000, "every transfer flowing");
      for (const c of callers) if (c.paused) c.stream.pause();

      const killedAt = Date.now();
      proc.child.kill("SIGKILL");
      // Every tunnel ended at the forwarding instance (CONNECT and gRPC alike), then the callers
      // that stopped reading catch up with what was sent before the break.
      await waitFor(
        async () => (await forwarder.gw.metrics.httpConnections.get()).values[0]?.value === 0,
        END_WAIT_MS,
        "the forwarding instance ended every CONNECT tunnel",
      );
      for (const c of callers) if (c.paused) c.stream.resume();
      const ends = await Promise.all(
        callers.map(async (c): Promise<TransferEnd> => {
          const e = await c.ended(END_WAIT_MS);
          c.stream.destroy();
          open.delete(c.stream);
          return {
            round,
            frontend: c.frontend,
            paused: c.paused,
            how: e.how,
            ...(e.code === undefined ? {} : { code: e.code }),
            bytes: c.bytes(),
            msAfterKill: (e.at ?? Date.now()) - killedAt,
          };
        }),
      );
      await proc.exited;
      return ends;
    },

    async stop() {
      for (const s of open) s.destroy();
      if (current) {
        current.child.kill("SIGKILL");
        await current.exited;
      }
      grpc.close();
      await agent?.stop();
      await links?.close();
      await forwarder.gw.close();
      await backend.close();
    },
  };
}

const CONTEXT: DialContext = {
  caller: { tenant: "default", principal: "cert:kube-apiserver#01", listener: "tcp" },
  frontend: "grpc",
};

export interface Caller {
  stream: Duplex;
  frontend: "connect" | "grpc";
  paused: boolean;
  bytes(): number;
  ended(timeoutMs: number): Promise<{ how: TransferEnd["how"]; code?: string; at?: number }>;
}

/** Counts what `stream` reads and tells how it ended first: a clean end, or an error. */
export function watch(stream: Duplex | Socket, frontend: Caller["frontend"], paused: boolean): Caller {
  let n = 0;
  stream.on("data", (c: Buffer) => {
    n += c.length;
  });
  const first = new Promise<{ how: TransferEnd["how"]; code?: string; at: number }>((resolve) => {
    stream.once("end", () => resolve({ how: "end", at: Date.now() }));
    stream.once("error", (err: NodeJS.ErrnoException) =>
      resolve({ how: "error", code: err.code ?? err.message, at: Date.now() }),
    );
  });
  stream.on("error", () => {}); // observed above; a second error is no news
  return {
    stream,
    frontend,
    paused,
    bytes: () => n,
    ended: (timeoutMs) => {
      let timer: NodeJS.Timeout | undefined;
      const hung = new Promise<{ how: "hung" }>((resolve) => {
        timer = setTimeout(() => resolve({ how: "hung" }), timeoutMs);
      });
      return Promise.race([first, hung]).finally(() => clearTimeout(timer));
    },
  };
}

/** Transfers that ended cleanly: each one a broken tunnel read as a complete one. */
export function cleanEnds(transfers: readonly TransferEnd[]): TransferEnd[] {
  return transfers.filter((t) => t.how === "end");
}

/** One line per outcome: frontend, paused or not, how, code, and how many. */
export function summarize(transfers: readonly TransferEnd[]): string[] {
  const counts = new Map<string, number>();
  for (const t of transfers) {
    const key = `${t.frontend}${t.paused ? " (paused)" : ""}: ${t.how}${t.code ? ` ${t.code}` : ""}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return [...counts].sort().map(([k, n]) => `${k} × ${n}`);
}
