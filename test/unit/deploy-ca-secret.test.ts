import { describe, expect, it } from "vitest";
import { checkSecretId, readCaFromSecret, type SecretReader } from "../../lib/deploy/ca-secret.js";
import { caSecretJson, parseCaSecret, tlsSecretJson } from "../../lib/deploy/secret-layout.js";
import { ConfigError, GatewayError } from "../../lib/errors.js";
import { createCa } from "../../lib/pki/ca.js";

const ca = await createCa({ commonName: "test gateway CA" });
const other = await createCa({ commonName: "another CA" });
const reader = (value: string | Error): SecretReader & { asked: string[] } => {
  const asked: string[] = [];
  return {
    asked,
    getSecretString: async (id) => {
      asked.push(id);
      if (value instanceof Error) throw value;
      return value;
    },
  };
};
const awsError = (name: string, message = "from AWS") => Object.assign(new Error(message), { name });

describe("--ca-secret: the gateway CA from Secrets Manager", () => {
  it("reads the CA kgw pki ca wrote, by name or ARN", async () => {
    const r = reader(caSecretJson({ certificate: ca.certPem, privateKey: ca.keyPem }));
    const arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:KgwStatefulSecretsGatewayCa-AbC123";
    await expect(readCaFromSecret(arn, r)).resolves.toEqual({ certPem: ca.certPem, keyPem: ca.keyPem });
    await expect(readCaFromSecret("kgw/gateway-ca", r)).resolves.toMatchObject({ certPem: ca.certPem });
    expect(r.asked).toEqual([arn, "kgw/gateway-ca"]);
  });

  it("takes PEMs pasted with CRLF line ends", async () => {
    const crlf = JSON.stringify({
      certificate: ca.certPem.replace(/\n/g, "\r\n"),
      privateKey: ca.keyPem.replace(/\n/g, "\r\n"),
    });
    await expect(readCaFromSecret("kgw-ca", reader(crlf))).resolves.toEqual({
      certPem: ca.certPem,
      keyPem: ca.keyPem,
    });
  });

  it.each([
    ["the stack's placeholder", "{}", /has no "certificate"/],
    ["not JSON", "-----BEGIN CERTIFICATE-----", /is not JSON/],
    ["an array", "[]", /not a JSON object/],
    [
      "a key where the certificate goes",
      JSON.stringify({ certificate: ca.keyPem, privateKey: ca.keyPem }),
      /"certificate" is not a PEM certificate/,
    ],
    [
      "a TLS secret's leaf without its key",
      JSON.stringify({ certificate: ca.certPem }),
      /has no "privateKey"/,
    ],
    [
      "a key of another CA",
      caSecretJson({ certificate: ca.certPem, privateKey: other.keyPem }),
      /private key does not match/,
    ],
  ])("refuses %s as a usage error, without echoing the secret", async (_name, value, message) => {
    const err = await readCaFromSecret("kgw-ca", reader(value)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(message);
    expect((err as Error).message).not.toContain("PRIVATE KEY-----\n");
  });

  it("refuses a leaf that is not a CA", async () => {
    const leaf = await ca.issue({ commonName: "gw", dnsNames: ["gw.example.com"], usage: "server" });
    const err = await readCaFromSecret(
      "kgw-tls",
      reader(
        tlsSecretJson({ certificate: leaf.certPem, privateKey: leaf.keyPem, caCertificate: ca.certPem }),
      ),
    ).catch((e: unknown) => e);
    expect((err as Error).message).toMatch(/is not a CA/);
  });

  it.each([
    ["ResourceNotFoundException", "ERR_NOT_FOUND", /no such secret in this account and region/],
    ["AccessDeniedException", "ERR_FORBIDDEN", /secretsmanager:GetSecretValue/],
    ["CredentialsProviderError", "ERR_STORE_UNAVAILABLE", /no AWS credentials found/],
    ["TimeoutError", "ERR_STORE_UNAVAILABLE", /from AWS/],
  ])("turns %s into %s with a hint", async (name, code, message) => {
    const err = await readCaFromSecret("kgw-ca", reader(awsError(name))).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GatewayError);
    expect((err as GatewayError).code).toBe(code);
    expect((err as Error).message).toMatch(message);
  });

  it("checks the id before asking AWS", async () => {
    const r = reader("{}");
    await expect(readCaFromSecret("not a secret id!", r)).rejects.toThrow(ConfigError);
    expect(r.asked).toEqual([]);
    expect(() => checkSecretId("a".repeat(513))).toThrow(/not a secret name or ARN/);
  });

  it("bounds what it parses", () => {
    expect(() => parseCaSecret(" ".repeat(70_000), "test")).toThrow(/larger than any CA secret/);
  });
});
