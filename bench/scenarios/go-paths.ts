/**
 * The paths the Go konnectivity-client measures (bench/harness/go-client.ts): each gRPC frontend
 * (kgw, kgw in tenant mode, upstream's grpc server) to the benchmark backend. Without `go` on the
 * PATH there is no such client, and its rows say so.
 */
import { GoClient, type GoRoute, goClientBinary } from "../harness/go-client.js";
import type { TunnelStack } from "../harness/stacks.js";
import type { TenantStack } from "../harness/tenant-stack.js";
import type { BenchContext, Cell } from "../harness/types.js";
import { goVersion } from "../harness/upstream.js";
import { errorMessage } from "../harness/util.js";

export interface GoPaths {
  /** Null: no `go` on the PATH; an Error: the build failed. */
  client: GoClient | Error | null;
  /** By the same names as curl's: kgw, tenant, up. */
  routes: Record<string, GoRoute>;
}

export interface GoStacks {
  kgw: TunnelStack;
  tenant: TenantStack | Error | null;
  upGrpc: TunnelStack | Error | undefined;
  target: string;
}

export async function startGoPaths(ctx: BenchContext, s: GoStacks): Promise<GoPaths> {
  const routes: Record<string, GoRoute> = {
    kgw: { port: s.kgw.frontendPort, pki: ctx.pki, target: s.target },
  };
  if (s.tenant && !(s.tenant instanceof Error)) {
    routes.tenant = { port: s.tenant.stack.frontendPort, pki: s.tenant.callers, target: s.target };
  }
  if (s.upGrpc && !(s.upGrpc instanceof Error)) {
    routes.up = { port: s.upGrpc.frontendPort, pki: ctx.pki, target: s.target };
  }
  if (ctx.upstream === null && (await goVersion()) === null) return { client: null, routes };
  try {
    return { client: new GoClient(await goClientBinary(ctx.log), ctx.output, ctx.scope), routes };
  } catch (err) {
    ctx.log(`  Go bench client: ${errorMessage(err).split("\n")[0]}`);
    return { client: err instanceof Error ? err : new Error(String(err)), routes };
  }
}

/** The direct and relay cells of a Go client row: it only speaks through a tunnel. */
export const GO_BASELINE_NA: Cell = { na: "the Go client dials only through a Konnectivity server" };

/** A Go client row's cell for `name`: the figure, or why there is none. */
export function goCell(paths: GoPaths, cell: () => Cell): Cell {
  if (paths.client === null) return { na: "no `go` on the PATH to build the Go client" };
  if (paths.client instanceof Error) return { error: paths.client.message };
  return cell();
}
