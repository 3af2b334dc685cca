/**
 * A reconnect burst from one source address: `count` upstream-style agents (raw.ts,
 * connectGrpcAgent) all wanting to register at once, `concurrency` connections in flight, as a
 * large cluster behind one NAT address comes back when its server instance is replaced. An agent
 * whose attempt fails (reset before TLS, refused in the handshake, its stream ended) tries again
 * after a full-jitter backoff, as upstream's proxy-agent does; the figures are how many were
 * refused on their first try and the time until every agent was registered.
 */
import type { ClientHttp2Session } from "node:http2";
import type { BenchPki } from "./pki.js";
import type { AgentStreams } from "./raw.js";
import { connectGrpcAgent } from "./raw.js";
import { inBatches, now, sleep } from "./util.js";

/**
 * The agent's retry: full jitter from RETRY_BASE_MS doubling to RETRY_CAP_MS. Upstream's
 * proxy-agent retries a failed connection with a jittered 1 s backoff; a shorter first step
 * only favours a server that refuses.
 */
const RETRY_BASE_MS = 1_000;
const RETRY_CAP_MS = 10_000;
/** An agent still not registered after this many attempts fails the burst. */
const MAX_ATTEMPTS = 20;

export interface BurstResult {
  /** Agents whose first attempt failed. */
  refusedFirstTry: number;
  /** Attempts made in all (count when none was refused). */
  attempts: number;
  /** From the first connection to the last agent registered. */
  allRegisteredMs: number;
  /** The registered agents, open until closed. */
  streams: AgentStreams;
}

export async function burstAgents(
  pki: BenchPki,
  agentPort: number,
  opts: { count: number; concurrency: number; idPrefix: string; token: string },
): Promise<BurstResult> {
  const sessions: ClientHttp2Session[] = [];
  const ended = { n: 0 };
  let refusedFirstTry = 0;
  let attempts = 0;
  const t0 = now();
  const close = () => {
    for (const s of sessions) s.destroy();
  };
  const registerOne = async (i: number) => {
    for (let attempt = 0; ; attempt++) {
      attempts++;
      const agent = connectGrpcAgent(pki, agentPort, `${opts.idPrefix}-${i}`, opts.token);
      try {
        await agent.registered;
        sessions.push(agent.session);
        agent.stream.once("close", () => ended.n++);
        return;
      } catch (err) {
        agent.session.destroy();
        if (attempt === 0) refusedFirstTry++;
        if (attempt + 1 >= MAX_ATTEMPTS) throw err;
        await sleep(Math.random() * Math.min(RETRY_CAP_MS, RETRY_BASE_MS * 2 ** attempt));
      }
    }
  };
  try {
    await inBatches(opts.count, opts.concurrency, registerOne);
  } catch (err) {
    close();
    throw err;
  }
  return {
    refusedFirstTry,
    attempts,
    allRegisteredMs: now() - t0,
    streams: { count: opts.count, ended: () => ended.n, close },
  };
}
