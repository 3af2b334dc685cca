/**
 * The status model's parts in one gateway: what it keeps in memory (each tenant's recent dials,
 * each credential's last use, when it started) and the three places it is read from (the admin
 * port's JSON, a peer's status call, a tenant's `GET /v1/status`). The gateway builds one and
 * wires it; nothing here runs per packet, and per dial only a map increment.
 */
import type { Logger } from "../../observability/logger.js";
import type { Routes } from "../../transport/http-endpoints.js";
import type { BackendRegistry } from "../core/backend-registry.js";
import type { GatewayPolicy } from "../policy/gateway-policy.js";
import type { FleetMembership } from "../routing.js";
import { CredentialUseBook } from "./credential-use.js";
import { type InstanceAnswer, tenantDetail } from "./fleet-status.js";
import { type LocalStatusSource, localSlice } from "./local-status.js";
import { statusPageRoutes } from "./page/page-routes.js";
import { type SelfStatus, selfStatusOf } from "./self-status-response.js";
import { createSelfStatusRoute, type GetRoute, gatewayGetRoutes } from "./self-status-route.js";
import type { InstanceSlice } from "./status-model.js";
import { statusReader } from "./status-reader.js";
import { statusRoutes } from "./status-routes.js";
import { TenantActivity } from "./tenant-activity.js";

/** What the gateway lends the status model to read, when asked. */
export interface GatewayStatusParts {
  draining(): boolean;
  /** The agent streams connected here. */
  registry: Pick<BackendRegistry, "all" | "agents">;
  openTunnels(): number;
  /** The fleet, which asks its peers (FleetMembership.statusOf); absent: this instance alone. */
  fleet?: Pick<FleetMembership, "statusOf">;
}

export class GatewayStatus {
  readonly activity: TenantActivity;
  readonly credentials = new CredentialUseBook();
  private readonly source: LocalStatusSource;
  private readonly fleet: ((self: InstanceSlice, tenant?: string) => Promise<InstanceAnswer[]>) | undefined;

  constructor(
    private readonly instance: string,
    parts: GatewayStatusParts,
    private readonly now: () => number = Date.now,
  ) {
    this.activity = new TenantActivity(instance, now);
    const fleet = parts.fleet;
    this.fleet = fleet && ((self, tenant) => fleet.statusOf(self, tenant));
    this.source = {
      instance,
      startedAt: now(),
      draining: parts.draining,
      agents: () => parts.registry.all(),
      agentsOf: (tenant) => parts.registry.agents(tenant),
      openTunnels: parts.openTunnels,
      activity: this.activity,
      credentials: this.credentials,
      now,
    };
  }

  /** `policy` with its authenticators noting each credential's use (in memory, per handshake). */
  observe(policy: GatewayPolicy): GatewayPolicy {
    const book = this.credentials;
    return {
      ...policy,
      authenticateAgent: (creds) => {
        const p = policy.authenticateAgent(creds);
        if (p.credentialIds) book.used(p.tenant, "agent", p.credentialIds);
        return p;
      },
      authenticateCaller: (creds) => {
        const c = policy.authenticateCaller(creds);
        if (c.credentialIds) book.used(c.tenant, "caller", c.credentialIds);
        return c;
      },
    };
  }

  /** This instance's slice (only `tenant`'s part, when given): what a peer asking is sent. */
  readonly local = (tenant?: string): InstanceSlice => localSlice(this.source, tenant);

  /** The admin port's JSON (`/status`, `/status/tenants/<id>`) and page (`/ui`, `/ui/tenants/<id>`). */
  adminRoutes(): Routes {
    const read = statusReader({
      instance: this.instance,
      local: this.local,
      ...(this.fleet ? { fleet: this.fleet } : {}),
      now: this.now,
    });
    return { ...statusRoutes(read), ...statusPageRoutes(read) };
  }

  /** A tenant's own status across the fleet (`GET /v1/status` on the gateway port). */
  async tenantStatus(tenant: string): Promise<SelfStatus> {
    const self = this.local(tenant);
    const answers = this.fleet ? await this.fleet(self, tenant) : [{ slice: self }];
    const slices = answers.flatMap((a) => a.slice?.tenants.filter((t) => t.tenant === tenant) ?? []);
    return selfStatusOf(
      tenantDetail(tenant, slices),
      answers.some((a) => a.slice === null),
      this.now(),
    );
  }

  /** The gateway port's GET routes: a tenant's `GET /v1/status`, and the install link if on. */
  getRoutes(policy: Pick<GatewayPolicy, "authenticateCaller">, log: Logger, install?: GetRoute): GetRoute {
    const selfStatus = createSelfStatusRoute({
      authenticate: policy.authenticateCaller,
      statusOf: (t) => this.tenantStatus(t),
      log,
    });
    return gatewayGetRoutes(selfStatus, install);
  }
}
