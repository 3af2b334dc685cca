import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { type CertificateAuthority, createCa } from "../../lib/pki/ca.js";
import { writePemFiles } from "../../lib/pki/files.js";
import type { IssuedCertificate } from "../../lib/pki/issue.js";

export interface TestPkiFiles {
  caCert: string;
  caKey: string;
  /** CN "localhost", SANs localhost / 127.0.0.1 / ::1, usable as server and client. */
  serverCert: string;
  serverKey: string;
  /** Client cert, CN "agent-1". */
  agentCert: string;
  agentKey: string;
  /** Client cert, CN "kube-apiserver". */
  frontendCert: string;
  frontendKey: string;
  /** An unrelated CA, trusted by nothing. */
  otherCaCert: string;
  otherCaKey: string;
  /** Client cert, CN "agent-1", signed by the other CA. */
  otherClientCert: string;
  otherClientKey: string;
}

export interface TestPki {
  /** Temporary directory holding all files; removed when the process exits. */
  dir: string;
  ca: CertificateAuthority;
  server: IssuedCertificate;
  agent: IssuedCertificate;
  frontend: IssuedCertificate;
  /** For "wrong CA" tests. */
  otherCa: CertificateAuthority;
  /** Same CN as `agent`, so a rejection can only be down to the issuing CA. */
  otherClient: IssuedCertificate;
  /** Absolute paths of the PEM files, for code under test that takes paths. */
  files: TestPkiFiles;
}

let cached: Promise<TestPki> | undefined;

/**
 * Memoised per module instance, i.e. one PKI per test process, or per test file under Vitest's
 * default isolation: tests that share it get consistent trust without re-minting keys for each
 * test. Treat the result as read-only.
 */
export function getTestPki(): Promise<TestPki> {
  cached ??= createTestPki().catch((err: unknown) => {
    // Let a later caller retry rather than replaying the same failure.
    cached = undefined;
    throw err;
  });
  return cached;
}

async function createTestPki(): Promise<TestPki> {
  const [ca, otherCa] = await Promise.all([
    createCa({ commonName: "kgw-test-ca" }),
    createCa({ commonName: "kgw-test-other-ca" }),
  ]);
  const [server, agent, frontend, otherClient] = await Promise.all([
    ca.issue({
      commonName: "localhost",
      dnsNames: ["localhost"],
      ipAddresses: ["127.0.0.1", "::1"],
      usage: "both",
    }),
    ca.issue({ commonName: "agent-1", usage: "client" }),
    ca.issue({ commonName: "kube-apiserver", usage: "client" }),
    otherCa.issue({ commonName: "agent-1", usage: "client" }),
  ]);

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kgw-pki-"));
  removeAtExit(dir);
  const files: TestPkiFiles = {
    caCert: path.join(dir, "ca.pem"),
    caKey: path.join(dir, "ca-key.pem"),
    serverCert: path.join(dir, "server.pem"),
    serverKey: path.join(dir, "server-key.pem"),
    agentCert: path.join(dir, "agent.pem"),
    agentKey: path.join(dir, "agent-key.pem"),
    frontendCert: path.join(dir, "frontend.pem"),
    frontendKey: path.join(dir, "frontend-key.pem"),
    otherCaCert: path.join(dir, "other-ca.pem"),
    otherCaKey: path.join(dir, "other-ca-key.pem"),
    otherClientCert: path.join(dir, "other-client.pem"),
    otherClientKey: path.join(dir, "other-client-key.pem"),
  };
  await writePemFiles(dir, {
    ...pemFiles("ca", ca),
    ...pemFiles("server", server),
    ...pemFiles("agent", agent),
    ...pemFiles("frontend", frontend),
    ...pemFiles("other-ca", otherCa),
    ...pemFiles("other-client", otherClient),
  });
  return { dir, ca, server, agent, frontend, otherCa, otherClient, files };
}

function pemFiles(stem: string, pems: IssuedCertificate): Record<string, string> {
  return { [`${stem}.pem`]: pems.certPem, [`${stem}-key.pem`]: pems.keyPem };
}

function removeAtExit(dir: string): void {
  // Synchronous: nothing asynchronous runs once "exit" fires.
  const remove = () => fs.rmSync(dir, { recursive: true, force: true });
  process.once("exit", remove);
  // Vitest stops its fork workers with SIGTERM, which kills the process without any "exit" event.
  for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) {
    process.once(signal, () => {
      remove();
      // Listening disabled the default action (terminate); restore it unless someone else handles it.
      if (process.listenerCount(signal) === 0) {
        process.kill(process.pid, signal);
      }
    });
  }
}
