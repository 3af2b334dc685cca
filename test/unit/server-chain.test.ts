import { X509Certificate } from "node:crypto";
import { describe, expect, it } from "vitest";
import { withIssuerChain } from "../../lib/transport/server-chain.js";
import { getTestPki } from "../helpers/pki.js";

const pem = (text: string) => Buffer.from(text, "utf8");

/** The certificates of a PEM bundle, by fingerprint, in order. */
function fingerprints(bundle: Buffer): string[] {
  const blocks = bundle
    .toString("utf8")
    .match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g);
  return (blocks ?? []).map((b) => new X509Certificate(b).fingerprint256);
}

describe("the chain a server presents, built at start-up", () => {
  it("appends the CA from the trust bundle that issued the server's certificate", async () => {
    const pki = await getTestPki();
    const bundle = pem(pki.otherCa.certPem + pki.ca.certPem);
    const chain = withIssuerChain(pem(pki.server.certPem), bundle);
    expect(fingerprints(chain)).toEqual([
      new X509Certificate(pki.server.certPem).fingerprint256,
      new X509Certificate(pki.ca.certPem).fingerprint256,
    ]);
  });

  it("leaves a certificate alone whose issuer is not in the bundle", async () => {
    const pki = await getTestPki();
    const cert = pem(pki.server.certPem);
    expect(withIssuerChain(cert, pem(pki.otherCa.certPem))).toBe(cert);
    expect(withIssuerChain(cert, undefined)).toBe(cert);
  });

  it("leaves a file that already holds a chain, or a self-signed certificate, as it is", async () => {
    const pki = await getTestPki();
    const given = pem(pki.server.certPem + pki.ca.certPem);
    expect(withIssuerChain(given, pem(pki.ca.certPem))).toBe(given);
    const root = pem(pki.ca.certPem);
    expect(withIssuerChain(root, root)).toBe(root);
  });

  it("never chains a CA that did not sign the certificate", async () => {
    const pki = await getTestPki();
    // otherClient was signed by otherCa: a bundle holding only the main CA adds nothing.
    const cert = pem(pki.otherClient.certPem);
    expect(withIssuerChain(cert, pem(pki.ca.certPem))).toBe(cert);
  });
});
