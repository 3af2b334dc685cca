/**
 * `kgw server`: parse options once, start a gateway, stop gracefully on SIGTERM/SIGINT
 * (a second signal stops at once); SIGHUP reopens the audit log file (log rotation).
 */

import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { packageDefaultAgentImage } from "../../lib/commands/release-stamp-file.js";
import { parseServerOptions, serverHelp } from "../../lib/config/server-options.js";
import { GatewayError } from "../../lib/errors.js";
import type { HostedParts } from "../../lib/fleet/start-fleet.js";
import { ServerMetrics } from "../../lib/metrics/server-metrics.js";
import { createLogger } from "../../lib/observability/logger.js";
import { clearPortsFile, writePortsFile } from "../../lib/observability/ports-file.js";
import { AUDIT_STDOUT, type AuditLog, openAuditLog } from "../../lib/server/audit/audit-log.js";
import { Gateway } from "../../lib/server/gateway.js";
import { type MetricsEmf, startMetricsEmf } from "../../lib/server/metrics-emf.js";
import type { GatewayPolicy } from "../../lib/server/policy/gateway-policy.js";
import { openPolicy } from "../../lib/server/policy/open-policy.js";
import { checkNodeInternals } from "../../lib/transport/node-internals.js";
import { scavengePacer } from "../../lib/transport/scavenge-pacer.js";

export async function main(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  let parsed: ReturnType<typeof parseServerOptions>;
  try {
    parsed = parseServerOptions(argv, env);
    // The install route's default image is this release's by digest when the package holds its
    // stamp (never in the image itself: it cannot hold its own digest).
    const install = parsed.help ? null : parsed.options.tenancy?.install;
    if (install) install.image ??= packageDefaultAgentImage();
  } catch (err) {
    process.stderr.write(`kgw server: ${(err as Error).message}\n`);
    return 2;
  }
  if (parsed.help) {
    process.stdout.write(serverHelp());
    return 0;
  }
  const log = createLogger({ name: "kgw-server", level: parsed.options.logLevel });
  let gateway: Gateway;
  let audit: AuditLog | undefined;
  let hosted: HostedParts<GatewayPolicy> | undefined;
  let emf: MetricsEmf | undefined;
  // A signal that arrives while the gateway starts (it logs "listening" before start returns)
  // is kept and acted on once it has started, instead of Node's default of exiting at once.
  let early: string | null = null;
  const onEarlySignal = (signal: string) => {
    early ??= signal;
  };
  process.on("SIGTERM", onEarlySignal);
  process.on("SIGINT", onEarlySignal);
  const dropEarly = () => {
    process.off("SIGTERM", onEarlySignal);
    process.off("SIGINT", onEarlySignal);
  };
  const portsFile = parsed.options.portsFile;
  try {
    checkNodeInternals();
    if (portsFile) await clearPortsFile(portsFile);
    // The drop-in (one tenant) or tenants from a store: the policy is the only difference; a
    // fleet adds its membership (lib/fleet/).
    const metrics = new ServerMetrics();
    const auditLog = parsed.options.auditLog;
    audit = auditLog ? await openAuditLog(auditLog, { log, metrics }) : undefined;
    const opened = (client?: DynamoDBClient) => openPolicy(parsed.options, log, metrics, client);
    // The fleet (and with it the AWS SDK) is loaded only when asked for: a drop-in server starts
    // listening sooner without it. Its tenant store is opened while it joins (start-fleet.ts).
    hosted = parsed.options.fleet
      ? await (await import("../../lib/fleet/start-fleet.js")).startFleet(
          parsed.options,
          { log, metrics },
          opened,
        )
      : undefined;
    // A peer port without a fleet needs only its listener, loaded then too: its certificate code
    // (lib/pki/, @peculiar/x509) took about 220 ms of a drop-in server's start-up
    // (docs/PERFORMANCE.md, `scale`).
    const routing =
      !hosted && parsed.options.peer
        ? { servePeers: (await import("../../lib/fleet/peer/peer-listener.js")).buildPeerListener }
        : undefined;
    const policy = hosted ? hosted.alongside : await opened();
    gateway = await Gateway.start(parsed.options, {
      log,
      policy,
      metrics,
      audit,
      fleet: hosted?.fleet,
      routing,
      callerBytesRead: scavengePacer().read,
    });
    if (portsFile) await writePortsFile(portsFile, boundPorts(gateway.addresses)).catch(closeOn(gateway));
    const emfOptions = parsed.options.metricsEmf;
    if (emfOptions) emf = startMetricsEmf(emfOptions, parsed.options.serverId, { metrics, log });
  } catch (err) {
    dropEarly();
    await hosted?.fleet.stop(0);
    hosted?.client.destroy();
    await audit?.close();
    process.stderr.write(`kgw server: ${err instanceof GatewayError ? err.message : String(err)}\n`);
    return 1;
  }
  const stopped = async (code: number) => {
    // After the gateway: the last set counts the drain's dials.
    await emf?.stop();
    hosted?.client.destroy();
    if (portsFile) await clearPortsFile(portsFile).catch(() => {});
    return code;
  };
  return new Promise((resolve) => {
    let stopping = false;
    const onSignal = (signal: string) => {
      if (stopping) {
        log.warn({ signal }, "second signal: stopping now");
        void gateway
          .close()
          .then(() => stopped(1))
          .then(resolve);
        return;
      }
      stopping = true;
      log.info({ signal }, "signal received: graceful shutdown");
      void gateway
        .shutdown()
        .then(() => stopped(0))
        .then(resolve);
    };
    process.on("SIGTERM", onSignal);
    process.on("SIGINT", onSignal);
    dropEarly();
    if (early) onSignal(early);
    // Only with a file to reopen: otherwise SIGHUP keeps its default (stop), as upstream's.
    if (audit && parsed.options.auditLog !== AUDIT_STDOUT) process.on("SIGHUP", () => audit?.reopen());
  });
}

/** What --ports-file announces: every TCP listener that is on, by the name of its flag's port. */
function boundPorts(a: Gateway["addresses"]): Record<string, number> {
  const ports: Record<string, number> = { agent: a.agent.port, admin: a.admin.port, health: a.health.port };
  if (a.frontend) ports.frontend = a.frontend.port;
  if (a.peer) ports.peer = a.peer.port;
  if (a.install) ports.install = a.install.port;
  return ports;
}

/** A started gateway that cannot announce its ports is closed before the error is reported. */
const closeOn =
  (gateway: Gateway) =>
  async (err: unknown): Promise<never> => {
    await gateway.close();
    throw err;
  };
