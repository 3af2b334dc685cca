/**
 * gRPC metadata names of the Konnectivity protocol and the agent-identifier format. Names are
 * upstream's; gRPC metadata keys are case-insensitive on the wire and lower-cased by grpc-js.
 */

export const Header = {
  /** Sent by the agent: its unique ID; exactly one value. */
  agentId: "agentid",
  /** Sent by the agent: URL-query-encoded identifiers (host, ipv4, ipv6, cidr, default-route). */
  agentIdentifiers: "agentidentifiers",
  /** `Bearer <token>` when token authentication is used. */
  authorization: "authorization",
  /** Sent by the server in the response headers: its ID. */
  serverId: "serverid",
  /** Sent by the server in the response headers: how many servers the agent should connect to. */
  serverCount: "servercount",
} as const;

export const BEARER_PREFIX = "Bearer ";

/**
 * Sent by our agent: the version it runs, shown in the server's status API. An extension of
 * ours: upstream servers ignore metadata they do not know, and upstream agents never send it
 * (their version shows as unknown).
 */
export const AGENT_VERSION_HEADER = "kgw-agent-version";

/** What a version may look like (semver and build tags); anything else is shown as unknown. */
export const AGENT_VERSION_PATTERN = /^[A-Za-z0-9][A-Za-z0-9.+_-]{0,63}$/;

export interface AgentIdentifiers {
  host: string[];
  ipv4: string[];
  ipv6: string[];
  cidr: string[];
  defaultRoute: boolean;
}

export const emptyIdentifiers = (): AgentIdentifiers => ({
  host: [],
  ipv4: [],
  ipv6: [],
  cidr: [],
  defaultRoute: false,
});

/**
 * Parses `host=a&ipv4=1.2.3.4&default-route=true`. Unknown keys are ignored, as upstream does,
 * so that newer agents can add identifier types without breaking older servers.
 */
export function parseAgentIdentifiers(encoded: string): AgentIdentifiers {
  const ids = emptyIdentifiers();
  for (const [key, value] of new URLSearchParams(encoded)) {
    switch (key) {
      case "host":
        ids.host.push(value.toLowerCase());
        break;
      case "ipv4":
        ids.ipv4.push(value);
        break;
      case "ipv6":
        ids.ipv6.push(value);
        break;
      case "cidr":
        ids.cidr.push(value);
        break;
      case "default-route":
        ids.defaultRoute = ids.defaultRoute || value === "true" || value === "1";
        break;
    }
  }
  return ids;
}
