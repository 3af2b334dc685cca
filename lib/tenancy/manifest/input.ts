/**
 * What the agent manifest is made from, and the one place it is checked. The input is a plain
 * object so that every producer builds it the same way: `kgw tenant manifest` from flags, the
 * install route from an install token and the server's configuration. Everything is checked here,
 * before any object is built, and each failure names its field (InvalidManifestInputError).
 */
import { X509Certificate } from "node:crypto";
import { parseGatewayAddress } from "../bundle/gateway-address.js";
import { checkTenantId, preview } from "../tenant-id.js";
import { parseToken } from "../tokens.js";
import { InvalidManifestInputError } from "./errors.js";
import { DEFAULT_KGW_AGENT_IMAGE, DEFAULT_UPSTREAM_AGENT_IMAGE, imageReferenceProblem } from "./images.js";

/**
 * Which agent the Deployment runs. Both take the same flags (ours keep upstream's names), so the
 * objects are the same; only the image and the command differ.
 */
export const AGENT_FLAVORS = ["kgw", "upstream"] as const;
export type AgentFlavor = (typeof AGENT_FLAVORS)[number];

export const DEFAULT_NAMESPACE = "kgw-system";
/** Two, so that a node drain or a rollout never leaves the cluster unreachable. */
export const DEFAULT_REPLICAS = 2;
/**
 * Each replica keeps a connection to every gateway instance; beyond a few, more replicas add
 * load on the gateway, not availability.
 */
export const MAX_REPLICAS = 10;
/**
 * A ConfigMap holds at most 1 MiB. A private CA bundle is a few KiB; even the public roots are
 * about 200 KiB. A larger input is a wrong file.
 */
export const MAX_CA_BUNDLE_BYTES = 256 * 1024;

export interface AgentManifestInput {
  tenantId: string;
  /** The gateway's public address, as `--gateway-address` / KGW_GATEWAY_ADDRESS gives it. */
  gateway: { host: string; port: number };
  /** PEM certificate(s) the agent verifies the gateway's serving certificate with. */
  caPem: string;
  /** An agent token of the tenant, in full (kgw_agent_<tenant>_…). It goes into the Secret. */
  agentToken: string;
  /** Default: the flavor's image (DEFAULT_KGW_AGENT_IMAGE or DEFAULT_UPSTREAM_AGENT_IMAGE). */
  image?: string | undefined;
  /** Default DEFAULT_NAMESPACE. */
  namespace?: string | undefined;
  /** Default DEFAULT_REPLICAS. */
  replicas?: number | undefined;
  /** Default "kgw". */
  flavor?: AgentFlavor | undefined;
}

/** The input with every default filled in and every field checked. */
export interface AgentManifestSpec {
  readonly tenantId: string;
  readonly gateway: { readonly host: string; readonly port: number };
  readonly caPem: string;
  readonly agentToken: string;
  /** The token's public id, for the Secret's annotation (matches `kgw tenant show`). */
  readonly agentTokenId: string;
  readonly image: string;
  readonly namespace: string;
  readonly replicas: number;
  readonly flavor: AgentFlavor;
}

export function checkManifestInput(input: AgentManifestInput): AgentManifestSpec {
  const tenantId = checkManifestTenantId(input.tenantId);
  const flavor = checkFlavor(input.flavor ?? "kgw");
  const token = parseToken(input.agentToken);
  if (token?.kind !== "agent" || token.tenantId !== tenantId) {
    // Never quote it: a token of the wrong tenant is still somebody's secret.
    throw new InvalidManifestInputError("agentToken", `not an agent token of tenant ${tenantId}`);
  }
  return {
    tenantId,
    gateway: checkGateway(input.gateway),
    caPem: checkCaPem(input.caPem),
    agentToken: input.agentToken,
    agentTokenId: token.tokenId,
    image: checkImage(input.image ?? defaultImage(flavor)),
    namespace: checkNamespace(input.namespace ?? DEFAULT_NAMESPACE),
    replicas: checkReplicas(input.replicas ?? DEFAULT_REPLICAS),
    flavor,
  };
}

export function defaultImage(flavor: AgentFlavor): string {
  return flavor === "kgw" ? DEFAULT_KGW_AGENT_IMAGE : DEFAULT_UPSTREAM_AGENT_IMAGE;
}

// The checks of single fields are exported for the option parser, which refuses bad flags
// before a token is minted.

export function checkFlavor(flavor: string): AgentFlavor {
  const found = AGENT_FLAVORS.find((f) => f === flavor);
  if (!found) {
    throw new InvalidManifestInputError(
      "flavor",
      `${preview(flavor)} is not one of ${AGENT_FLAVORS.join(", ")}`,
    );
  }
  return found;
}

export function checkImage(image: unknown): string {
  if (typeof image !== "string") throw new InvalidManifestInputError("image", "not a string");
  const problem = imageReferenceProblem(image);
  if (problem) throw new InvalidManifestInputError("image", `${preview(image)}: ${problem}`);
  return image;
}

/** A namespace name is a DNS label (RFC 1123), as Kubernetes validates it. */
export function checkNamespace(namespace: unknown): string {
  if (typeof namespace !== "string" || !/^(?=.{1,63}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(namespace)) {
    throw new InvalidManifestInputError(
      "namespace",
      `${preview(namespace)} is not a namespace name (1-63 of a-z, 0-9 and '-', starting and ending with a letter or digit)`,
    );
  }
  return namespace;
}

export function checkReplicas(replicas: unknown): number {
  if (!Number.isSafeInteger(replicas) || (replicas as number) < 1 || (replicas as number) > MAX_REPLICAS) {
    throw new InvalidManifestInputError("replicas", `must be an integer from 1 to ${MAX_REPLICAS}`);
  }
  return replicas as number;
}

function checkManifestTenantId(id: unknown): string {
  try {
    return checkTenantId(id);
  } catch (err) {
    throw new InvalidManifestInputError("tenantId", (err as Error).message);
  }
}

/** Host and port as parseGatewayAddress accepts them: a DNS name or an IP literal, 1-65535. */
function checkGateway(gateway: AgentManifestInput["gateway"]): { host: string; port: number } {
  const host = typeof gateway?.host === "string" ? gateway.host : "";
  const port = gateway?.port;
  if (!Number.isSafeInteger(port))
    throw new InvalidManifestInputError("gateway", "the port is not an integer");
  const parsed = parseGatewayAddress(host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`);
  if ("error" in parsed) throw new InvalidManifestInputError("gateway", parsed.error);
  return { host: parsed.host, port: parsed.port };
}

/**
 * Certificates only, in PEM: it goes into a ConfigMap, readable by anyone who can read the
 * namespace, so a private key pasted by mistake must never get there.
 */
function checkCaPem(pem: unknown): string {
  const fail = (why: string) => new InvalidManifestInputError("caPem", why);
  if (typeof pem !== "string") throw fail("not a string");
  if (pem.length > MAX_CA_BUNDLE_BYTES) throw fail(`larger than ${MAX_CA_BUNDLE_BYTES / 1024} KiB`);
  if (!/^[\x20-\x7e\r\n\t]*$/.test(pem)) throw fail("not PEM text");
  const labels = [...pem.matchAll(/-----BEGIN ([A-Z0-9 ]+)-----/g)].map((m) => m[1]);
  if (labels.length === 0) throw fail("holds no PEM certificate");
  if (labels.some((l) => l !== "CERTIFICATE")) throw fail("holds something other than certificates");
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[^-]*-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length !== labels.length) throw fail("holds a certificate without its END line");
  for (const [i, block] of blocks.entries()) {
    try {
      new X509Certificate(block);
    } catch {
      throw fail(`certificate ${i + 1} of ${blocks.length} does not parse`);
    }
  }
  return pem;
}
