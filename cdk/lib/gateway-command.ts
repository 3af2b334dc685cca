/**
 * The gateway container's command line and the environment variables it reads its PEMs from.
 * Pure data, so tests read it as an operator would (test/cdk/gateway-command.test.ts).
 */
import { SECRET_KEYS, type SecretKey } from "../../lib/deploy/secret-layout.js";
import { EMF_INTERVAL_SECONDS } from "./gateway-metrics.js";
import { GATEWAY_PORTS } from "./ports.js";

/**
 * Environment variables that carry PEM text, filled by ECS from Secrets Manager (`secrets` with a
 * JSON key), and read by the PEM flags' `env:NAME` form. Deliberately not the names of flags'
 * own environment variables (KGW_CA_CERT is --tenant-ca-cert's path), so nothing is read twice.
 */
export const PEM_ENV = {
  tlsCert: "KGW_PEM_TLS_CERT",
  tlsKey: "KGW_PEM_TLS_KEY",
  tenantCa: "KGW_PEM_TENANT_CA",
  peerCert: "KGW_PEM_PEER_CERT",
  peerKey: "KGW_PEM_PEER_KEY",
  peerCa: "KGW_PEM_PEER_CA",
} as const;

/** Which secret and which JSON key fills each variable. */
export const PEM_ENV_SOURCES: Readonly<
  Record<keyof typeof PEM_ENV, { secret: "gatewayTls" | "peerTls"; key: SecretKey }>
> = {
  tlsCert: { secret: "gatewayTls", key: SECRET_KEYS.certificate },
  tlsKey: { secret: "gatewayTls", key: SECRET_KEYS.privateKey },
  tenantCa: { secret: "gatewayTls", key: SECRET_KEYS.caCertificate },
  peerCert: { secret: "peerTls", key: SECRET_KEYS.certificate },
  peerKey: { secret: "peerTls", key: SECRET_KEYS.privateKey },
  peerCa: { secret: "peerTls", key: SECRET_KEYS.caCertificate },
};

export interface GatewayCommandInput {
  tableName: string;
  domainName: string;
  gracefulShutdownSeconds: number;
  /**
   * Always given, so that the task definition shows which image tenants install (deploy-config.ts
   * chooses the default).
   */
  agentImage: string;
}

const env = (name: string): string => `env:${name}`;

/** `kgw server …` in hosted fleet mode; everything listens on all of the task's interfaces. */
export function gatewayCommand(input: GatewayCommandInput): string[] {
  return [
    "server",
    `--registry-table=${input.tableName}`,
    `--agent-port=${GATEWAY_PORTS.gateway}`,
    "--agent-bind-address=0.0.0.0",
    `--cluster-cert=${env(PEM_ENV.tlsCert)}`,
    `--cluster-key=${env(PEM_ENV.tlsKey)}`,
    `--tenant-ca-cert=${env(PEM_ENV.tenantCa)}`,
    `--install-port=${GATEWAY_PORTS.install}`,
    `--install-gateway-address=${input.domainName}:${GATEWAY_PORTS.gateway}`,
    `--install-agent-image=${input.agentImage}`,
    `--admin-port=${GATEWAY_PORTS.admin}`,
    "--admin-bind-address=0.0.0.0",
    `--health-port=${GATEWAY_PORTS.health}`,
    "--health-bind-address=0.0.0.0",
    `--peer-port=${GATEWAY_PORTS.peer}`,
    "--peer-bind-address=0.0.0.0",
    `--peer-cert=${env(PEM_ENV.peerCert)}`,
    `--peer-key=${env(PEM_ENV.peerKey)}`,
    `--peer-ca-cert=${env(PEM_ENV.peerCa)}`,
    `--graceful-shutdown-timeout=${input.gracefulShutdownSeconds}s`,
    "--audit-log=-",
    // Metrics as EMF documents on stdout; the log router sends them to CloudWatch (kgw.conf).
    `--metrics-emf-interval=${EMF_INTERVAL_SECONDS}s`,
  ];
}

/**
 * The container's health check: /healthz on the health port, with the image's own node (no curl
 * in the image). The same probe as the target groups'.
 */
export const CONTAINER_HEALTH_CHECK = [
  "CMD",
  "node",
  "-e",
  `fetch("http://127.0.0.1:${GATEWAY_PORTS.health}/healthz").then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))`,
];
