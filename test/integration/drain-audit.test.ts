/**
 * A tunnel cut by a drain is audited as `drained` (ERR_DRAINED), not as `broken`/ERR_AGENT_GONE:
 * a rolling deployment must not raise the dial-failure alarm (cdk/lib/constructs/gateway-alarms.ts
 * counts broken tunnels) nor blame the agent. Both drains end a tunnel: the gateway's, when its
 * --graceful-shutdown-timeout runs out with the tunnel open, and the agent's, when it sent DRAIN
 * and then ended its stream. A tunnel whose agent simply went away stays `broken`.
 */
import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { type AddressInfo, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { PeerLinks } from "../../lib/fleet/peer/peer-links.js";
import { FAILED_DIAL_OUTCOMES } from "../../lib/metrics/emf/emf-catalog.js";
import type { DialAuditRecord } from "../../lib/server/audit/audit-record.js";
import { startTestAgent, waitFor } from "../helpers/agent.js";
import { connectThrough } from "../helpers/connect-client.js";
import { gatewayFlags, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import {
  forwardEverything,
  getPeerPki,
  peerFlags,
  startFleetGateway,
  testPeerLinks,
} from "../helpers/peer.js";
import { getTestPki } from "../helpers/pki.js";
import { activeResources, expectNoLeakedResources } from "../helpers/resources.js";

let echo: Server;
let echoAddress: string;
let dir: string;
let baseline: Map<string, number>;

beforeAll(async () => {
  await getTestPki();
  baseline = activeResources();
  dir = mkdtempSync(path.join(tmpdir(), "kgw-drain-audit-"));
  echo = createServer((s) => {
    s.on("error", () => {});
    s.pipe(s);
  });
  echo.listen(0, "127.0.0.1");
  await once(echo, "listening");
  echoAddress = `127.0.0.1:${(echo.address() as AddressInfo).port}`;
});

afterAll(async () => {
  echo.close();
  rmSync(dir, { recursive: true, force: true });
  await expectNoLeakedResources(baseline);
});

function records(file: string): DialAuditRecord[] {
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as DialAuditRecord);
}

/** A gateway auditing to its own file, our agent on it, and one open tunnel through them. */
async function tunnelOnGateway(name: string, flags: string[]) {
  const auditFile = path.join(dir, `${name}.log`);
  const t: TestGateway = await startTestGateway([
    `--server-id=${name}`,
    `--audit-log=${auditFile}`,
    ...flags,
  ]);
  const { agent } = await startTestAgent(t.pki, t.gw.addresses.agent.port);
  await waitFor(() => t.gw.ready && agent.ready, 10_000, "agent connected");
  const tunnel = await connectThrough(
    { kind: "tls", host: "127.0.0.1", port: t.gw.addresses.frontend!.port, pki: t.pki },
    echoAddress,
  );
  expect(tunnel.status).toBe(200);
  expect(await echoed(tunnel.socket, "open")).toBe("open");
  // The caller sees the cut as a broken tunnel (never a clean end): not what this file checks.
  tunnel.socket.on("error", () => {});
  return { t, agent, socket: tunnel.socket, auditFile };
}

function echoed(socket: Socket, text: string): Promise<string> {
  return new Promise((resolve) => {
    let got = "";
    const onData = (c: Buffer) => {
      got += c.toString();
      if (got.length >= text.length) {
        socket.off("data", onData);
        resolve(got);
      }
    };
    socket.on("data", onData);
    socket.write(text);
  });
}

describe("a tunnel cut by a drain", () => {
  it("the gateway's drain runs out with the tunnel open: drained, ERR_DRAINED, not a failed dial", async () => {
    const { t, agent, socket, auditFile } = await tunnelOnGateway("gw-drain", [
      "--graceful-shutdown-timeout=1s",
    ]);
    // The tunnel stays open through the drain; the drain's end cuts it.
    await t.gw.shutdown();
    socket.destroy();
    const [record] = records(auditFile);
    expect(record).toMatchObject({ outcome: "drained", code: "ERR_DRAINED", instance: "gw-drain" });
    expect(FAILED_DIAL_OUTCOMES).not.toContain(record!.outcome);
    await agent.stop();
  });

  it("its agent drains, then ends its stream with the tunnel open: drained, ERR_DRAINED", async () => {
    const { t, agent, socket, auditFile } = await tunnelOnGateway("gw-agent-drain", []);
    const session = [...t.gw.registry.all()][0]!;
    // --drain-timeout is the agent's; here the test ends the drain, as a second signal would.
    const drained = agent.drain();
    await waitFor(() => session.draining, 5_000, "the gateway saw the agent's DRAIN");
    await agent.stop();
    await drained;
    await waitFor(() => records(auditFile).length === 1, 5_000, "the tunnel's record written");
    expect(records(auditFile)[0]).toMatchObject({ outcome: "drained", code: "ERR_DRAINED" });
    socket.destroy();
    await t.gw.close();
  });

  it("its agent goes away without a drain: still broken, ERR_AGENT_GONE", async () => {
    const { t, agent, socket, auditFile } = await tunnelOnGateway("gw-agent-gone", []);
    await agent.stop();
    await waitFor(() => records(auditFile).length === 1, 5_000, "the tunnel's record written");
    expect(records(auditFile)[0]).toMatchObject({ outcome: "broken", code: "ERR_AGENT_GONE" });
    socket.destroy();
    await t.gw.close();
  });
});

/** An owner with the agent, a forwarding instance, and one tunnel through both. */
async function forwardedTunnel() {
  const pki = await getTestPki();
  const peer = await getPeerPki(pki);
  const drainFlags = ["--graceful-shutdown-timeout=1s"];
  const owner = await startFleetGateway([
    ...gatewayFlags(pki),
    ...peerFlags(pki, peer),
    "--server-id=gw-owner",
    ...drainFlags,
  ]);
  let links: PeerLinks | undefined;
  const forwarder = await startFleetGateway(
    [...gatewayFlags(pki), "--server-id=gw-forwarder", ...drainFlags],
    {
      directory: forwardEverything(
        () => links!,
        () => owner.instance!,
      ),
    },
  );
  links = testPeerLinks(pki, peer, { instanceId: "gw-forwarder", log: forwarder.log });
  const { agent } = await startTestAgent(pki, owner.gw.addresses.agent.port);
  await waitFor(() => owner.gw.ready && agent.ready, 10_000, "agent connected to the owner");
  const tunnel = await connectThrough(
    { kind: "tls", host: "127.0.0.1", port: forwarder.gw.addresses.frontend!.port, pki },
    echoAddress,
  );
  expect(tunnel.status).toBe(200);
  tunnel.socket.on("error", () => {});
  expect(await echoed(tunnel.socket, "via the owner")).toBe("via the owner");
  return {
    owner,
    forwarder,
    async close() {
      tunnel.socket.destroy();
      await agent.stop();
      await links!.close();
      await forwarder.gw.close();
      await owner.gw.close();
    },
  };
}

describe("a forwarded tunnel cut by a drain", () => {
  it("its owner's: audited drained where the dial arrived (the owner says so in its CLOSE_RSP)", async () => {
    const { owner, forwarder, close } = await forwardedTunnel();
    await owner.gw.shutdown();
    await waitFor(() => forwarder.audit.length === 1, 5_000, "the forwarder's record of the tunnel");
    expect(forwarder.audit[0]).toMatchObject({
      instance: "gw-forwarder",
      owner: "gw-owner",
      outcome: "drained",
      code: "ERR_DRAINED",
    });
    expect(owner.audit).toEqual([]); // the forwarder writes the one record of a forwarded dial
    await close();
  });

  it("the forwarding instance's own: drained, not the caller's clean close", async () => {
    const { forwarder, close } = await forwardedTunnel();
    await forwarder.gw.shutdown();
    // Written before the stop ends (the audit log is closed then): a record after it is lost.
    expect(forwarder.audit).toHaveLength(1);
    expect(forwarder.audit[0]).toMatchObject({
      instance: "gw-forwarder",
      outcome: "drained",
      code: "ERR_DRAINED",
    });
    await close();
  });
});
