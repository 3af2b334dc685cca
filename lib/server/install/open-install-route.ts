/**
 * Builds the install route from the server's options at start: the CA bundle is read once, and a
 * manifest is rendered with a throwaway token (never stored), so that a bad file, image or
 * namespace stops the server at start instead of failing every fetch later.
 */
import { readFile } from "node:fs/promises";
import type { InstallOptions } from "../../config/server-options.js";
import { ConfigError } from "../../errors.js";
import type { ServerMetrics } from "../../metrics/server-metrics.js";
import type { Logger } from "../../observability/logger.js";
import { InvalidManifestInputError } from "../../tenancy/manifest/errors.js";
import { MAX_CA_BUNDLE_BYTES } from "../../tenancy/manifest/input.js";
import { renderAgentManifest } from "../../tenancy/manifest/render.js";
import type { TenantStore } from "../../tenancy/store.js";
import { generateToken } from "../../tenancy/tokens.js";
import { readPem } from "../../transport/tls-files.js";
import { createInstallRoute, type InstallRoute } from "./install-route.js";

const FLAG_OF: Partial<Record<InvalidManifestInputError["field"], string>> = {
  caPem: "--install-ca-bundle",
  gateway: "--install-gateway-address",
  image: "--install-agent-image",
  namespace: "--install-namespace",
};

export async function openInstallRoute(
  opts: InstallOptions,
  deps: { store: TenantStore; log: Logger; metrics: ServerMetrics; now?: () => Date },
): Promise<InstallRoute> {
  let caPem: string;
  try {
    const bytes = opts.caBundle.startsWith("env:")
      ? readPem(opts.caBundle, "--install-ca-bundle")
      : await readFile(opts.caBundle);
    if (bytes.length > MAX_CA_BUNDLE_BYTES) throw new Error(`larger than ${MAX_CA_BUNDLE_BYTES / 1024} KiB`);
    caPem = bytes.toString("utf8");
  } catch (err) {
    throw new ConfigError(`--install-ca-bundle ${opts.caBundle}: ${(err as Error).message}`, { cause: err });
  }
  const render = (tenantId: string, agentToken: string) =>
    renderAgentManifest({
      tenantId,
      gateway: { host: opts.gateway.host, port: opts.gateway.port },
      caPem,
      agentToken,
      image: opts.image,
      namespace: opts.namespace,
    });
  try {
    render("install-check", generateToken("agent", "install-check").token);
  } catch (err) {
    if (err instanceof InvalidManifestInputError) {
      throw new ConfigError(`${FLAG_OF[err.field] ?? err.field}: ${err.reason}`, { cause: err });
    }
    throw err;
  }
  deps.log.info(
    { gateway: `${opts.gateway.host}:${opts.gateway.port}`, namespace: opts.namespace },
    "serving the one-line agent install: GET /v1/install/<token>.yaml",
  );
  return createInstallRoute({ ...deps, render });
}
