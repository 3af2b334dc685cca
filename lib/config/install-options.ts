/**
 * The one-line install route's flags (lib/server/install/), parsed and checked here, once;
 * SERVER_FLAGS includes them.
 */
import { ConfigError } from "../errors.js";
import { type GatewayAddress, parseGatewayAddress } from "../tenancy/bundle/gateway-address.js";
import { checkImage, checkNamespace, DEFAULT_NAMESPACE } from "../tenancy/manifest/input.js";
import { defineFlags, type FlagValues } from "./flags.js";

export const INSTALL_FLAGS = defineFlags({
  "install-gateway-address": {
    kind: "string",
    default: "",
    help: "With --tenant-store-dir: serve the one-line agent install (GET /v1/install/<token>.yaml on --agent-port); host:port the installed agents dial, as the gateway's serving certificate names it. Off when empty.",
  },
  "install-port": {
    kind: "port",
    default: 0,
    help: "With --install-gateway-address: also serve the install route, and nothing else, on this TLS port (for a load balancer's TLS listener with a publicly trusted certificate in front; 0: only on --agent-port).",
  },
  "install-bind-address": {
    kind: "string",
    default: "",
    help: "With --install-port: its bind address (all if empty).",
  },
  "install-ca-bundle": {
    kind: "string",
    default: "",
    help: "With --install-gateway-address: the CA bundle (PEM) installed agents verify the gateway with (default: --tenant-ca-cert).",
  },
  "install-agent-image": {
    kind: "string",
    default: "",
    help: "With --install-gateway-address: the installed agent's image, with a tag or digest (default: this version's kgw image, by digest when the package holds its release's release.json).",
  },
  "install-namespace": {
    kind: "string",
    default: DEFAULT_NAMESPACE,
    help: "With --install-gateway-address: the namespace of the installed agent's objects.",
  },
});

/** What the install route's manifests hold besides the tenant and its token. */
export interface InstallOptions {
  /** What the installed agents dial (--install-gateway-address). */
  gateway: GatewayAddress;
  /** File with the CA bundle they verify the gateway with (read and checked at start). */
  caBundle: string;
  /** undefined: the kgw agent image of this version (services/server/main.ts fills it in). */
  image: string | undefined;
  namespace: string;
  /** A TLS listener of its own serving only the route (--install-port); null: the agent port only. */
  listener: { port: number; host: string } | null;
}

export const INSTALL_FLAG_NAMES = [
  "install-gateway-address",
  "install-port",
  "install-bind-address",
  "install-ca-bundle",
  "install-agent-image",
  "install-namespace",
] as const;

/** The install route is off unless its address is given: nothing is served by surprise. */
export function parseInstall(
  f: FlagValues<typeof INSTALL_FLAGS>,
  /** --tenant-ca-cert: the CA bundle unless --install-ca-bundle names another. */
  tenantCaCert: string,
): InstallOptions | null {
  if (!f["install-gateway-address"]) {
    const stray = INSTALL_FLAG_NAMES.find((flag) => flag !== "install-namespace" && f[flag]);
    if (stray || f["install-namespace"] !== DEFAULT_NAMESPACE) {
      throw new ConfigError(`--${stray ?? "install-namespace"} needs --install-gateway-address`);
    }
    return null;
  }
  const gateway = parseGatewayAddress(f["install-gateway-address"]);
  if ("error" in gateway) throw new ConfigError(`--install-gateway-address: ${gateway.error}`);
  if (f["install-bind-address"] && !f["install-port"]) {
    throw new ConfigError("--install-bind-address needs --install-port");
  }
  const asConfig = <T>(flag: string, fn: () => T): T => {
    try {
      return fn();
    } catch (err) {
      throw new ConfigError(`--${flag}: ${(err as { reason?: string }).reason ?? (err as Error).message}`);
    }
  };
  return {
    gateway,
    caBundle: f["install-ca-bundle"] || tenantCaCert,
    image: f["install-agent-image"]
      ? asConfig("install-agent-image", () => checkImage(f["install-agent-image"]))
      : undefined,
    namespace: asConfig("install-namespace", () => checkNamespace(f["install-namespace"])),
    listener: f["install-port"] ? { port: f["install-port"], host: f["install-bind-address"] } : null,
  };
}
