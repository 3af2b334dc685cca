import { createPrivateKey, webcrypto, X509Certificate } from "node:crypto";
import fs from "node:fs";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import tls from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCa, loadCa } from "../../lib/pki/ca.js";
import { writePemFiles } from "../../lib/pki/files.js";
import type { IssuedCertificate } from "../../lib/pki/issue.js";
import { x509 } from "../../lib/pki/x509.js";
import { getTestPki, type TestPki } from "../helpers/pki.js";

const SERVER_AUTH = "1.3.6.1.5.5.7.3.1";
const CLIENT_AUTH = "1.3.6.1.5.5.7.3.2";

let pki: TestPki;
beforeAll(async () => {
  pki = await getTestPki();
});

const cert = (pem: string) => new X509Certificate(pem);

describe("mutual TLS with issued certificates", () => {
  it("accepts the agent's client certificate and lets the client verify the server by name", async () => {
    const result = await mutualTls(pki.agent, { servername: "localhost" });

    expect(result.server).toMatchObject({ accepted: true, peerCN: "agent-1" });
    expect(result.clientAuthorized).toBe(true);
  });

  it("lets the client verify the server by IP SAN when dialled by address", async () => {
    const result = await mutualTls(pki.frontend, {});

    expect(result.server).toMatchObject({ accepted: true, peerCN: "kube-apiserver" });
    expect(result.clientAuthorized).toBe(true);
  });

  it("rejects a client certificate signed by another CA, even with an expected CN", async () => {
    const result = await mutualTls(pki.otherClient, { servername: "localhost" });

    expect(result.server.accepted).toBe(false);
    expect(result.server).toMatchObject({ authorizationError: "UNABLE_TO_VERIFY_LEAF_SIGNATURE" });
  });

  it("rejects a server-only certificate presented as a client certificate", async () => {
    const serverOnly = await pki.ca.issue({ commonName: "agent-1", usage: "server" });

    const result = await mutualTls(serverOnly, { servername: "localhost" });

    expect(result.server.accepted).toBe(false);
    expect(result.server).toMatchObject({ authorizationError: "INVALID_PURPOSE" });
  });
});

describe("issued certificates", () => {
  it("marks the CA as a CA, leaves as non-CA, and leaves verify only against their own CA", () => {
    const caCert = cert(pki.ca.certPem);
    const agentCert = cert(pki.agent.certPem);

    expect(caCert.ca).toBe(true);
    expect(agentCert.ca).toBe(false);
    expect(agentCert.verify(caCert.publicKey)).toBe(true);
    expect(agentCert.checkIssued(caCert)).toBe(true);
    expect(agentCert.verify(cert(pki.otherCa.certPem).publicKey)).toBe(false);
    expect(cert(pki.otherClient.certPem).verify(caCert.publicKey)).toBe(false);
  });

  it("exports PKCS#8 P-256 keys that match their certificates", () => {
    for (const { certPem, keyPem } of [pki.ca, pki.server, pki.agent]) {
      expect(keyPem).toMatch(/^-----BEGIN PRIVATE KEY-----\n/);
      const key = createPrivateKey(keyPem);
      expect(key.asymmetricKeyDetails?.namedCurve).toBe("prime256v1");
      expect(cert(certPem).checkPrivateKey(key)).toBe(true);
    }
  });

  it("uses random positive 16-byte serials and backdates notBefore for clock skew", async () => {
    const before = Date.now();
    const issued = await pki.ca.issue({ commonName: "serial-check", usage: "client" });
    const serials = [pki.ca, pki.server, pki.agent, issued].map((c) => cert(c.certPem).serialNumber);

    for (const serial of serials) {
      expect(serial).toMatch(/^[0-7][0-9A-F]{31}$/i);
    }
    expect(new Set(serials).size).toBe(serials.length);
    expect(new Date(cert(issued.certPem).validFrom).getTime()).toBeLessThanOrEqual(before - 55_000);
  });

  it("sets extended key usage from the requested usage", async () => {
    const serverOnly = await pki.ca.issue({ commonName: "s", dnsNames: ["s.example"], usage: "server" });

    expect(cert(serverOnly.certPem).keyUsage).toEqual([SERVER_AUTH]);
    expect(cert(pki.agent.certPem).keyUsage).toEqual([CLIENT_AUTH]);
    expect(cert(pki.server.certPem).keyUsage).toEqual([SERVER_AUTH, CLIENT_AUTH]);
  });

  it("makes the server certificate valid for localhost, 127.0.0.1 and ::1 only", () => {
    const serverCert = cert(pki.server.certPem);
    const legacy = serverCert.toLegacyObject();

    expect(serverCert.checkHost("localhost")).toBe("localhost");
    expect(serverCert.checkIP("127.0.0.1")).toBe("127.0.0.1");
    expect(serverCert.checkIP("::1")).toBe("::1");
    expect(serverCert.checkIP("0:0:0:0:0:0:0:1")).toBe("0:0:0:0:0:0:0:1");
    for (const host of ["localhost", "127.0.0.1", "::1"]) {
      expect(tls.checkServerIdentity(host, legacy), host).toBeUndefined();
    }

    expect(serverCert.checkHost("example.com")).toBeUndefined();
    expect(serverCert.checkIP("127.0.0.2")).toBeUndefined();
    expect(tls.checkServerIdentity("example.com", legacy)).toBeInstanceOf(Error);
    expect(tls.checkServerIdentity("10.0.0.1", legacy)).toBeInstanceOf(Error);
  });

  it("encodes IPv6 addresses with an embedded IPv4 tail correctly", async () => {
    const issued = await pki.ca.issue({
      commonName: "mapped",
      ipAddresses: ["::ffff:10.1.2.3", "2001:db8::1"],
      usage: "server",
    });

    expect(cert(issued.certPem).checkIP("::ffff:10.1.2.3")).toBeDefined();
    expect(cert(issued.certPem).checkIP("2001:db8::1")).toBeDefined();
    expect(cert(issued.certPem).checkIP("::ffff:10.1.2.4")).toBeUndefined();
  });

  it("puts organizations in the subject as O attributes, as Kubernetes expects for groups", async () => {
    const issued = await pki.ca.issue({
      commonName: "admin",
      organization: ["system:masters", "team, with comma"],
      usage: "client",
    });

    const lines = cert(issued.certPem).subject.split("\n");
    expect(lines).toEqual(["O=system:masters", "O=team\\, with comma", "CN=admin"]);
  });

  it("never lets a leaf outlive its CA", async () => {
    const shortCa = await createCa({ commonName: "short-lived", validityDays: 2 });
    const issued = await shortCa.issue({ commonName: "leaf", usage: "client", validityDays: 365 });

    expect(new Date(cert(issued.certPem).validTo).getTime()).toBeLessThanOrEqual(
      new Date(cert(shortCa.certPem).validTo).getTime(),
    );
  });

  it("rejects inputs that would produce a certificate that cannot work", async () => {
    await expect(pki.ca.issue({ commonName: "x", dnsNames: ["127.0.0.1"], usage: "server" })).rejects.toThrow(
      /ipAddresses/,
    );
    await expect(
      pki.ca.issue({ commonName: "x", ipAddresses: ["localhost"], usage: "server" }),
    ).rejects.toThrow(/invalid IP/);
    await expect(pki.ca.issue({ commonName: "x", dnsNames: ["bad name"], usage: "server" })).rejects.toThrow(
      /invalid DNS name/,
    );
    await expect(pki.ca.issue({ commonName: " ", usage: "client" })).rejects.toThrow(/commonName/);
    await expect(pki.ca.issue({ commonName: "x", usage: "client", validityDays: 0 })).rejects.toThrow(
      /validityDays/,
    );
  });
});

describe("loadCa", () => {
  it("issues from a CA loaded from PEM", async () => {
    const loaded = loadCa({ certPem: pki.ca.certPem, keyPem: pki.ca.keyPem });
    const issued = await loaded.issue({ commonName: "tenant-a", usage: "client" });

    expect(cert(issued.certPem).verify(cert(pki.ca.certPem).publicKey)).toBe(true);
  });

  it("refuses a non-CA certificate or a key that does not belong to the CA", () => {
    expect(() => loadCa(pki.agent)).toThrow(/not a CA/);
    expect(() => loadCa({ certPem: pki.ca.certPem, keyPem: pki.otherCa.keyPem })).toThrow(/does not match/);
  });

  it("accepts an operator-supplied RSA CA", async () => {
    const rsaCa = await createRsaCa();
    const issued = await loadCa(rsaCa).issue({ commonName: "tenant-b", usage: "client" });

    const rsaCaCert = cert(rsaCa.certPem);
    expect(cert(issued.certPem).verify(rsaCaCert.publicKey)).toBe(true);
    expect(cert(issued.certPem).checkIssued(rsaCaCert)).toBe(true);
  });
});

describe("writePemFiles", () => {
  let dir: string;
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "kgw-pemfiles-"));
  });
  afterAll(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const mode = (file: string) => fs.statSync(file).mode & 0o777;

  it("writes the test PKI's keys with mode 0600 and certificates readable", () => {
    for (const file of [pki.files.caKey, pki.files.serverKey, pki.files.agentKey, pki.files.otherClientKey]) {
      expect(mode(file), file).toBe(0o600);
    }
    for (const file of [pki.files.caCert, pki.files.serverCert, pki.files.agentCert]) {
      expect(mode(file) & 0o400, file).toBe(0o400);
      expect(mode(file) & 0o022, file).toBe(0);
    }
    expect(fs.readFileSync(pki.files.serverCert, "utf8")).toBe(pki.server.certPem);
  });

  it("tightens an existing permissive file when a key replaces it, leaving no temp files", async () => {
    const existing = path.join(dir, "tls-key.pem");
    fs.writeFileSync(existing, "old", { mode: 0o644 });
    fs.chmodSync(existing, 0o644);

    const written = await writePemFiles(dir, {
      "tls-key.pem": pki.agent.keyPem,
      "tls.pem": pki.agent.certPem,
    });

    expect(written["tls-key.pem"]).toBe(existing);
    expect(mode(existing)).toBe(0o600);
    expect(fs.readFileSync(existing, "utf8")).toBe(pki.agent.keyPem);
    expect(fs.readdirSync(dir).sort()).toEqual(["tls-key.pem", "tls.pem"]);
  });

  it("treats PEM content holding a private key as a key whatever its name", async () => {
    const written = await writePemFiles(dir, { "bundle.pem": pki.agent.certPem + pki.agent.keyPem });

    expect(mode(written["bundle.pem"])).toBe(0o600);
  });

  it("refuses names that would escape the directory, before writing anything", async () => {
    await expect(writePemFiles(dir, { "ok.pem": "x", "../escape.pem": "x" })).rejects.toThrow(
      /plain file name/,
    );
    expect(fs.existsSync(path.join(dir, "ok.pem"))).toBe(false);
  });
});

type ServerVerdict =
  | { accepted: true; peerCN: string | string[] | undefined }
  /** `authorizationError` is OpenSSL's verification code, e.g. "INVALID_PURPOSE". */
  | { accepted: false; authorizationError: string | undefined };

interface MutualTlsResult {
  server: ServerVerdict;
  /** Whether the client verified the server; false if the connection failed before it could. */
  clientAuthorized: boolean;
}

/**
 * Runs one handshake between the test server certificate (trusting only the test CA) and a client
 * presenting `client`. The verdict comes from the server side: under TLS 1.3 the client can finish
 * its half of the handshake before the server has rejected its certificate.
 */
async function mutualTls(client: IssuedCertificate, opts: { servername?: string }): Promise<MutualTlsResult> {
  // Only TLS sockets: destroying the raw socket under a live TLSSocket crashes Node 20 (SIGSEGV).
  const sockets = new Set<tls.TLSSocket>();
  const server = tls.createServer({
    key: pki.server.keyPem,
    cert: pki.server.certPem,
    ca: pki.ca.certPem,
    requestCert: true,
    rejectUnauthorized: true,
  });
  const verdict = new Promise<ServerVerdict>((resolve) => {
    server.once("secureConnection", (socket) => {
      sockets.add(socket);
      resolve({ accepted: true, peerCN: socket.getPeerCertificate().subject?.CN });
    });
    // Node completes the handshake and only then checks the client certificate, destroying the
    // socket if it fails: the error is a bland ECONNRESET, and the reason sits on the socket.
    server.once("tlsClientError", (_error, socket) => {
      const reason: unknown = socket.authorizationError;
      resolve({ accepted: false, authorizationError: reason === undefined ? undefined : String(reason) });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));

  const socket = tls.connect({
    host: "127.0.0.1",
    port: (server.address() as AddressInfo).port,
    ...opts,
    ca: pki.ca.certPem,
    cert: client.certPem,
    key: client.keyPem,
  });
  const clientAuthorized = new Promise<boolean>((resolve) => {
    socket.once("secureConnect", () => resolve(socket.authorized));
    // A rejected client sees an alert or a reset; the server's verdict is what the tests assert on.
    socket.on("error", () => resolve(false));
    socket.once("close", () => resolve(false));
  });
  try {
    const [serverVerdict, authorized] = await Promise.all([verdict, clientAuthorized]);
    return { server: serverVerdict, clientAuthorized: authorized };
  } finally {
    socket.destroy();
    for (const s of sockets) {
      s.destroy();
    }
    await new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
  }
}

/** An RSA CA built directly with @peculiar/x509, standing in for one an operator already has. */
async function createRsaCa(): Promise<{ certPem: string; keyPem: string }> {
  const algorithm = {
    name: "RSASSA-PKCS1-v1_5",
    hash: "SHA-256",
    publicExponent: new Uint8Array([1, 0, 1]),
    modulusLength: 2048,
  };
  const keys = await webcrypto.subtle.generateKey(algorithm, true, ["sign", "verify"]);
  const caCert = await x509.X509CertificateGenerator.createSelfSigned({
    name: "CN=operator-rsa-ca",
    keys,
    signingAlgorithm: algorithm,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  const pkcs8 = await webcrypto.subtle.exportKey("pkcs8", keys.privateKey);
  return { certPem: caCert.toString("pem"), keyPem: x509.PemConverter.encode(pkcs8, "PRIVATE KEY") };
}
