/**
 * Two gateways of one fleet in one test process: an owner with a peer port (and agents), and a
 * forwarding instance whose agent directory sends every dial to the owner through PeerLinks, as
 * routing will once it has chosen an owner. Peer certificates come from the test CA (the same
 * CA as every tenant certificate, the case the peer identity check exists for) and from an
 * unrelated CA, for the tests that must be refused.
 */
import { parseServerOptions } from "../../lib/config/server-options.js";
import { issuePeerCertificate } from "../../lib/fleet/peer/peer-certificate-issue.js";
import { type PeerInstance, PeerLinks, type PeerTimings } from "../../lib/fleet/peer/peer-links.js";
import { buildPeerListener } from "../../lib/fleet/peer/peer-listener.js";
import { ServerMetrics } from "../../lib/metrics/server-metrics.js";
import type { Logger } from "../../lib/observability/logger.js";
import { writePemFiles } from "../../lib/pki/files.js";
import type { IssuedCertificate } from "../../lib/pki/issue.js";
import type { DialAuditRecord } from "../../lib/server/audit/audit-record.js";
import type { AgentDirectory } from "../../lib/server/core/dial-context.js";
import { Gateway } from "../../lib/server/gateway.js";
import { openPolicy } from "../../lib/server/policy/open-policy.js";
import type { GatewayRouting } from "../../lib/server/routing.js";
import { DEFAULT_DIAL_TIMEOUT_MS } from "../../lib/tunnel/durations.js";
import { captureLogger } from "./gateway.js";
import type { TestPki } from "./pki.js";

export interface PeerPki {
  /** A fleet peer certificate from the test CA (kgw://fleet/peer). */
  peer: IssuedCertificate;
  /** The same identity from an unrelated CA: must be refused. */
  otherCaPeer: IssuedCertificate;
  files: { peerCert: string; peerKey: string };
}

let cached: Promise<PeerPki> | undefined;

export function getPeerPki(pki: TestPki): Promise<PeerPki> {
  cached ??= (async () => {
    const [peer, otherCaPeer] = await Promise.all([
      issuePeerCertificate(pki.ca, "kgw-peer-test"),
      issuePeerCertificate(pki.otherCa, "kgw-peer-test"),
    ]);
    const written = await writePemFiles(pki.dir, { "peer.pem": peer.certPem, "peer-key.pem": peer.keyPem });
    return {
      peer,
      otherCaPeer,
      files: { peerCert: written["peer.pem"]!, peerKey: written["peer-key.pem"]! },
    };
  })();
  return cached;
}

/** Flags that turn the peer port on with the test CA as the peer CA. */
export function peerFlags(pki: TestPki, peer: PeerPki): string[] {
  return [
    // Any non-zero port turns it on; startFleetGateway listens on port 0 instead.
    "--peer-port=8135",
    "--peer-bind-address=127.0.0.1",
    `--peer-cert=${peer.files.peerCert}`,
    `--peer-key=${peer.files.peerKey}`,
    `--peer-ca-cert=${pki.files.caCert}`,
  ];
}

export interface FleetGateway {
  gw: Gateway;
  log: Logger;
  logs: string[];
  audit: DialAuditRecord[];
  /** The peer port's address as routing would read it from the registry. */
  instance: PeerInstance | null;
}

/**
 * Starts a gateway from `argv` (the CLI's own parser), the peer port (if on) on an ephemeral
 * port, audit records kept in memory.
 */
export async function startFleetGateway(
  argv: string[],
  deps: { directory?: GatewayRouting["directory"] } = {},
): Promise<FleetGateway> {
  const parsed = parseServerOptions(argv, {});
  if (parsed.help) throw new Error("unexpected help");
  const options = parsed.options;
  if (options.peer) options.peer = { ...options.peer, port: 0 };
  const { log, lines } = captureLogger();
  const metrics = new ServerMetrics();
  const policy = await openPolicy(options, log, metrics);
  const audit: DialAuditRecord[] = [];
  const gw = await Gateway.start(options, {
    log,
    policy,
    metrics,
    audit: { write: (r) => audit.push(r) },
    routing: { servePeers: buildPeerListener, ...deps },
  });
  const peer = gw.addresses.peer;
  return {
    gw,
    log,
    logs: lines,
    audit,
    instance: peer ? { id: options.serverId, host: "127.0.0.1", port: peer.port } : null,
  };
}

/** PeerLinks with the test peer certificate (or `identity`), quick to give up on a dead peer. */
export function testPeerLinks(
  pki: TestPki,
  peer: PeerPki,
  opts: {
    instanceId?: string;
    log: Logger;
    metrics?: ServerMetrics;
    identity?: IssuedCertificate;
    timings?: Partial<PeerTimings>;
    /** --backend-dial-timeout of the fleet (the default one). */
    backendDialTimeoutMs?: number;
  },
): PeerLinks {
  const id = opts.identity ?? peer.peer;
  return new PeerLinks({
    instanceId: opts.instanceId ?? "gw-forwarder",
    tls: { cert: id.certPem, key: id.keyPem, ca: pki.ca.certPem },
    log: opts.log,
    ...(opts.metrics ? { metrics: opts.metrics } : {}),
    backendDialTimeoutMs: opts.backendDialTimeoutMs ?? DEFAULT_DIAL_TIMEOUT_MS,
    timings: { connectTimeoutMs: 2000, failureBackoffBaseMs: 1000, failureBackoffMs: 1000, ...opts.timings },
  });
}

/** A directory that forwards every dial to `owner()` through `links`, as routing will. */
export function forwardEverything(
  links: () => PeerLinks,
  owner: () => PeerInstance,
): (local: unknown) => AgentDirectory {
  return () => ({ dial: (ctx, req, frontend) => links().dial(owner(), ctx, req, frontend) });
}
