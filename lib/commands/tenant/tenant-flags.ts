import { defineFlags } from "../../config/flags.js";
import { DEFAULT_INSTALL_TOKEN_TTL_MS } from "../../tenancy/install/install-tokens.js";
import { DEFAULT_CERT_VALIDITY_MS, DEFAULT_ROTATION_GRACE_MS } from "../../tenancy/limits.js";
import { DEFAULT_KGW_AGENT_IMAGE, DEFAULT_UPSTREAM_AGENT_IMAGE } from "../../tenancy/manifest/images.js";
import { DEFAULT_NAMESPACE, DEFAULT_REPLICAS } from "../../tenancy/manifest/input.js";
import { ADMIN_URL_ENV, ADMIN_URL_FLAG } from "../status/admin-url.js";

/** Where the bundle is mounted on control-plane nodes unless told otherwise. */
export const DEFAULT_MOUNT_DIR = "/etc/kubernetes/kgw";
/** Where the agent bundle is mounted in the agent's pod unless told otherwise (a Secret volume). */
export const DEFAULT_AGENT_MOUNT_DIR = "/etc/kgw-agent";
/** The socket path of the Kubernetes documentation's konnectivity-server example. */
export const DEFAULT_UDS_NAME = "/etc/kubernetes/konnectivity-server/konnectivity-server.socket";
/** Paths end up in YAML and on other machines: long or odd ones are mistakes, not needs. */
export const MAX_PATH_LENGTH = 1024;
/** A client certificate outliving five years is one nobody will remember to rotate. */
export const MAX_CERT_VALIDITY_MS = 5 * 365 * 86_400_000;
/** Shorter than a day and the bundle expires before it is deployed. */
export const MIN_CERT_VALIDITY_MS = 86_400_000;

export const TENANT_FLAGS = defineFlags({
  "store-dir": {
    kind: "string",
    default: "",
    help: "Directory of the tenant store (created by the first create).",
    env: "KGW_TENANT_STORE_DIR",
  },
  table: {
    kind: "string",
    default: "",
    help: "DynamoDB table of the tenant store, instead of --store-dir (region, endpoint and credentials: the AWS SDK's standard configuration, e.g. AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB).",
    env: "KGW_TENANT_TABLE",
  },
  output: { kind: "string", default: "text", help: "Output format: text or json." },
  json: { kind: "bool", default: false, help: "The same as --output=json." },
  yes: {
    kind: "bool",
    default: false,
    help: "delete, revoke: go ahead without asking (required when standard input is not a terminal).",
  },
  "display-name": { kind: "string", default: "", help: "create: a name for people (default: the id)." },
  "caller-token": {
    kind: "bool",
    default: false,
    help: "create: also issue a caller token (CONNECT Proxy-Authorization, for non-Kubernetes callers).",
  },
  bundle: { kind: "bool", default: true, help: "create: also issue and write the caller bundle." },
  all: { kind: "bool", default: false, help: "list: include deleted tenants." },
  [ADMIN_URL_FLAG]: {
    kind: "string",
    default: "",
    help: "show: any gateway instance's admin address (http://host:8133): adds the tenant's live state across the fleet (agents, tunnels, recent failures, last error, each credential's last use).",
    env: ADMIN_URL_ENV,
  },
  credential: {
    kind: "string",
    default: "agent-token",
    help: "rotate: which credential: agent-token, agent-certificate, caller-token or caller-certificate.",
  },
  grace: {
    kind: "duration",
    default: DEFAULT_ROTATION_GRACE_MS,
    help: "rotate: how long the credentials rotated out stay valid.",
  },
  "ca-cert": { kind: "string", default: "", help: "Gateway CA certificate (PEM).", env: "KGW_CA_CERT" },
  "ca-key": { kind: "string", default: "", help: "Gateway CA private key (PEM).", env: "KGW_CA_KEY" },
  "ca-secret": {
    kind: "string",
    default: "",
    help: "The gateway CA from AWS Secrets Manager instead of --ca-cert/--ca-key: a secret name or ARN holding {certificate, privateKey} (kgw pki ca's ca-secret.json), read with your own AWS credentials.",
    env: "KGW_CA_SECRET",
  },
  "server-ca-bundle": {
    kind: "string",
    default: "",
    help: "CA bundle kube-apiserver (or the agent) verifies the gateway's serving certificate with (default: --ca-cert).",
  },
  "gateway-address": {
    kind: "string",
    default: "",
    help: "host:port kube-apiserver (and, in a manifest, the agent) dials (must match the gateway's serving certificate).",
    env: "KGW_GATEWAY_ADDRESS",
  },
  out: {
    kind: "string",
    default: "",
    help: "Directory the bundle is written to (default ./kgw-bundle-<tenant>; an agent bundle ./kgw-agent-bundle-<tenant>); manifest: the YAML file, written 0600 (default: standard output).",
  },
  "mount-dir": {
    kind: "string",
    default: DEFAULT_MOUNT_DIR,
    help: `Where the bundle's files will be on the kube-apiserver hosts (paths in the YAML); for an agent bundle, in the agent's pod (default ${DEFAULT_AGENT_MOUNT_DIR}).`,
  },
  "uds-name": {
    kind: "string",
    default: DEFAULT_UDS_NAME,
    help: "Socket path for the Unix socket variant of the egress configuration.",
  },
  "uds-proxy-protocol": {
    kind: "string",
    default: "GRPC",
    help: "Protocol of the Unix socket variant: GRPC or HTTPConnect.",
  },
  "cert-validity": {
    kind: "duration",
    default: DEFAULT_CERT_VALIDITY_MS,
    help: "Validity of a caller or agent certificate (capped at the CA's own expiry).",
  },
  "agent-flavor": {
    kind: "string",
    default: "kgw",
    help: "manifest: which agent the Deployment runs: kgw (ours) or upstream (proxy-agent).",
  },
  "agent-image": {
    kind: "string",
    default: "",
    help: `manifest: the agent's image, with a tag or digest (default ${DEFAULT_KGW_AGENT_IMAGE}, or by digest with the release's release.json beside package.json; upstream flavor ${DEFAULT_UPSTREAM_AGENT_IMAGE}).`,
  },
  namespace: {
    kind: "string",
    default: DEFAULT_NAMESPACE,
    help: "manifest: namespace of the agent's objects.",
  },
  replicas: { kind: "int", default: DEFAULT_REPLICAS, help: "manifest: replicas of the agent's Deployment." },
  "max-tunnels": { kind: "int", default: 0, help: "quota: tunnels open at once (0: the server's default)." },
  "dial-rate": {
    kind: "int",
    default: 0,
    help: "quota: dials per second, sustained (0: the server's default).",
  },
  "dial-burst": {
    kind: "int",
    default: 0,
    help: "quota: dials at once above the rate (0: the server's default).",
  },
  "max-agents": { kind: "int", default: 0, help: "quota: agent streams at once (0: the server's default)." },
  "max-buffered-mib": {
    kind: "int",
    default: 0,
    help: "quota: MiB of tunneled bytes held at once, its tunnels' windows (0: the server's default).",
  },
  set: {
    kind: "bool",
    default: false,
    help: "policy: replace the egress policy with the RULEs given (none needs --deny-all).",
  },
  "deny-all": {
    kind: "bool",
    default: false,
    help: "policy --set with no RULE: confirm an empty policy, which refuses every dial of the tenant.",
  },
  default: { kind: "bool", default: false, help: "policy: reset the egress policy to the default." },
  "allow-loopback": {
    kind: "bool",
    default: false,
    help: "policy --set, create: let dials reach the agent host's loopback addresses.",
  },
  "allow-link-local": {
    kind: "bool",
    default: false,
    help: "policy --set, create: let dials reach link-local addresses, cloud metadata services included.",
  },
  ttl: {
    kind: "duration",
    default: DEFAULT_INSTALL_TOKEN_TTL_MS,
    help: "install-token: how long the install link works (at most 30 days, 720h).",
  },
  reusable: {
    kind: "bool",
    default: false,
    help: "install-token: the link works until it expires, not only for its first fetch (each fetch mints a new agent token).",
  },
});
