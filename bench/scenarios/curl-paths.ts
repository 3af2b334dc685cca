/**
 * The paths curl measures (bench/harness/curl.ts), next to the in-process clients' paths: its
 * own HTTP backend (curl speaks HTTP, not the backend's protocol), reached straight (direct TCP,
 * through the delay proxy in the WAN case), through a relay chain of its own, and through each
 * HTTP CONNECT proxy (kgw, kgw in tenant mode, upstream's http-connect server).
 */
import { CurlClient, type CurlRoute } from "../harness/curl.js";
import type { Child } from "../harness/procs.js";
import { startDelay, startHttpBackend, startRelayChain, type TunnelStack } from "../harness/stacks.js";
import type { TenantStack } from "../harness/tenant-stack.js";
import type { BenchContext } from "../harness/types.js";

/** tmpfs holds each download and upload file: at most this much of memory per transfer. */
export const CURL_MAX_BULK_BYTES = 256 * 1024 * 1024;

export interface CurlPaths {
  client: CurlClient;
  /** By the same names as the in-process paths: direct, relay, kgw, tenant, up (CONNECT only). */
  routes: Record<string, CurlRoute>;
  /** The processes in the middle of each route (server and agent, or the two relays). */
  middle: Record<string, Child[]>;
}

export interface CurlStacks {
  kgw: TunnelStack;
  tenant: TenantStack | Error | null;
  upConnect: TunnelStack | Error | undefined;
  delayMsEachWay?: number;
}

export async function startCurlPaths(ctx: BenchContext, s: CurlStacks): Promise<CurlPaths> {
  const d = s.delayMsEachWay;
  const http = await startHttpBackend(ctx);
  const [directPort, relay] = await Promise.all([
    d === undefined ? http.port : startDelay(ctx, http.port, d).then((e) => e.port),
    startRelayChain(ctx, http.port, d),
  ]);
  const routes: Record<string, CurlRoute> = {
    direct: { port: directPort },
    relay: { port: relay.port },
    kgw: { proxyPort: s.kgw.frontendPort, port: http.port, pki: ctx.pki },
  };
  const middle: Record<string, Child[]> = {
    direct: [],
    relay: [relay.first, relay.second],
    kgw: [s.kgw.server, s.kgw.agent!],
  };
  if (s.tenant && !(s.tenant instanceof Error)) {
    const { stack, callers } = s.tenant;
    routes.tenant = { proxyPort: stack.frontendPort, port: http.port, pki: callers };
    middle.tenant = [stack.server, stack.agent!];
  }
  if (s.upConnect && !(s.upConnect instanceof Error)) {
    routes.up = { proxyPort: s.upConnect.frontendPort, port: http.port, pki: ctx.pki };
    middle.up = [s.upConnect.server, s.upConnect.agent!];
  }
  return { client: new CurlClient(ctx.output, ctx.scope), routes, middle };
}
