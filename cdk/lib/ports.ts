/**
 * The ports of a gateway task (docs/DEPLOY.md, "Ports"). The gateway's own defaults where it has
 * them, so the task definition, the security groups and the load balancer agree with the server.
 */
import { SERVER_FLAGS } from "../../lib/config/server-flags.js";

export const GATEWAY_PORTS = {
  /** Agents, gRPC and CONNECT callers, one port for every role (TLS terminated by the gateway). */
  gateway: SERVER_FLAGS["agent-port"].default,
  /** /metrics and per-tenant readiness: reachable from inside the VPC only. */
  admin: SERVER_FLAGS["admin-port"].default,
  /** /healthz and /readyz: the target groups' health checks. */
  health: SERVER_FLAGS["health-port"].default,
  /** mTLS between the service's own tasks. */
  peer: 8135,
  /** Serves only GET /v1/install/<token>.yaml, behind the NLB's TLS 443 listener. */
  install: 8443,
} as const;

/** The NLB's listener for the install URL: `kubectl apply -f https://<domain>/v1/install/…`. */
export const INSTALL_LISTENER_PORT = 443;

/** What the target groups probe: alive and listening, agents or not (see the health check). */
export const HEALTH_CHECK_PATH = "/healthz";
