/**
 * Where a dial goes in a fleet (FleetMembership.directory, lib/server/routing.ts): this instance's own answering agents
 * first, as a single instance would; otherwise an instance that holds the tenant's agents, over
 * a peer link (routed-dial.ts). Dials forwarded here by a peer never come through this: the
 * gateway serves them from its own agents only (Gateway.dialLocal), so a dial crosses at most
 * one peer link.
 */
import type { BackendRegistry } from "../server/core/backend-registry.js";
import type { AgentDirectory, DialContext } from "../server/core/dial-context.js";
import type { DialHandle, DialRequest, FrontendEnd } from "../tunnel/endpoints.js";
import { RoutedDial, type RoutingDeps } from "./routed-dial.js";

export class FleetDirectory implements AgentDirectory {
  constructor(
    private readonly local: BackendRegistry,
    private readonly routing: Omit<RoutingDeps, "local">,
  ) {}

  dial(ctx: DialContext, req: DialRequest, frontend: FrontendEnd): DialHandle {
    if (this.local.agents(ctx.caller.tenant).some((a) => a.responsive)) {
      return this.local.dial(ctx, req, frontend);
    }
    return new RoutedDial({ ...this.routing, local: this.local }, ctx, req, frontend).start();
  }
}
