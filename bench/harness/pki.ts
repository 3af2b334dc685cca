/**
 * A throwaway PKI for one benchmark run: a CA, a server certificate for 127.0.0.1/localhost
 * (frontend and agent listeners), and client certificates for the frontend caller and the
 * agents. Written to a temporary directory that is removed when the run ends. The CA's key is
 * written too: in tenant mode it is the gateway CA `kgw tenant create` issues caller
 * certificates with (tenant-stack.ts).
 */
import { rmSync } from "node:fs";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { createCa } from "../../lib/pki/ca.js";
import { writePemFiles } from "../../lib/pki/files.js";

export const AGENT_TOKEN = "bench-agent-token-0123456789abcdef";

export interface BenchPki {
  dir: string;
  caPem: string;
  serverCertPem: string;
  serverKeyPem: string;
  agentCertPem: string;
  agentKeyPem: string;
  frontendCertPem: string;
  frontendKeyPem: string;
  files: {
    caCert: string;
    caKey: string;
    serverCert: string;
    serverKey: string;
    agentCert: string;
    agentKey: string;
    frontendCert: string;
    frontendKey: string;
    /** Holds AGENT_TOKEN, for agents that read their token from a file. */
    agentToken: string;
  };
  remove(): void;
}

export async function createBenchPki(): Promise<BenchPki> {
  const ca = await createCa({ commonName: "kgw-bench-ca" });
  const [server, agent, frontend] = await Promise.all([
    ca.issue({ commonName: "localhost", dnsNames: ["localhost"], ipAddresses: ["127.0.0.1"], usage: "both" }),
    ca.issue({ commonName: "bench-agent", usage: "client" }),
    ca.issue({ commonName: "kube-apiserver", usage: "client" }),
  ]);
  const dir = await mkdtemp(path.join(tmpdir(), "kgw-bench-"));
  const written = await writePemFiles(dir, {
    "ca.pem": ca.certPem,
    "ca-key.pem": ca.keyPem,
    "server.pem": server.certPem,
    "server-key.pem": server.keyPem,
    "agent.pem": agent.certPem,
    "agent-key.pem": agent.keyPem,
    "frontend.pem": frontend.certPem,
    "frontend-key.pem": frontend.keyPem,
  });
  const agentToken = path.join(dir, "agent-token");
  await writeFile(agentToken, AGENT_TOKEN, { mode: 0o600 });
  return {
    dir,
    caPem: ca.certPem,
    serverCertPem: server.certPem,
    serverKeyPem: server.keyPem,
    agentCertPem: agent.certPem,
    agentKeyPem: agent.keyPem,
    frontendCertPem: frontend.certPem,
    frontendKeyPem: frontend.keyPem,
    files: {
      caCert: written["ca.pem"],
      caKey: written["ca-key.pem"],
      serverCert: written["server.pem"],
      serverKey: written["server-key.pem"],
      agentCert: written["agent.pem"],
      agentKey: written["agent-key.pem"],
      frontendCert: written["frontend.pem"],
      frontendKey: written["frontend-key.pem"],
      agentToken,
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
