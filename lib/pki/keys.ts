import { createPrivateKey, type KeyObject, webcrypto } from "node:crypto";
import { x509 } from "./x509.js";

/** WebCrypto parameters needed to sign certificates with an existing private key. */
export interface SigningKey {
  readonly key: webcrypto.CryptoKey;
  readonly algorithm: { readonly name: string; readonly hash: string };
}

const P256: webcrypto.EcKeyGenParams = { name: "ECDSA", namedCurve: "P-256" };

/** Fresh ECDSA P-256 key pair; extractable so the private half can be written out as PEM. */
export async function generateKeyPair(): Promise<webcrypto.CryptoKeyPair> {
  return webcrypto.subtle.generateKey(P256, true, ["sign", "verify"]);
}

export async function exportPrivateKeyPem(key: webcrypto.CryptoKey): Promise<string> {
  const der = await webcrypto.subtle.exportKey("pkcs8", key);
  return withTrailingNewline(x509.PemConverter.encode(der, "PRIVATE KEY"));
}

/**
 * Imports a CA private key for signing. Operators may bring their own CA, so this accepts any PEM
 * Node can parse (PKCS#8, SEC1, PKCS#1) and any key type WebCrypto can sign certificates with.
 */
export async function importSigningKey(keyPem: string): Promise<SigningKey> {
  const keyObject = createPrivateKey(keyPem);
  const { importAlgorithm, algorithm } = signingParamsFor(keyObject);
  const pkcs8 = keyObject.export({ type: "pkcs8", format: "der" });
  const key = await webcrypto.subtle.importKey("pkcs8", pkcs8, importAlgorithm, false, ["sign"]);
  return { key, algorithm };
}

// Hash strength follows the key size, as CAs conventionally do (and some verifiers insist on).
const EC_CURVES: Readonly<Record<string, { namedCurve: string; hash: string }>> = {
  prime256v1: { namedCurve: "P-256", hash: "SHA-256" },
  secp384r1: { namedCurve: "P-384", hash: "SHA-384" },
  secp521r1: { namedCurve: "P-521", hash: "SHA-512" },
};

function signingParamsFor(keyObject: KeyObject): {
  importAlgorithm: webcrypto.EcKeyImportParams | webcrypto.RsaHashedImportParams;
  algorithm: SigningKey["algorithm"];
} {
  if (keyObject.asymmetricKeyType === "ec") {
    const curve = EC_CURVES[keyObject.asymmetricKeyDetails?.namedCurve ?? ""];
    if (curve) {
      return {
        importAlgorithm: { name: "ECDSA", namedCurve: curve.namedCurve },
        algorithm: { name: "ECDSA", hash: curve.hash },
      };
    }
  }
  if (keyObject.asymmetricKeyType === "rsa") {
    const algorithm = { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" };
    return { importAlgorithm: algorithm, algorithm };
  }
  const curve = keyObject.asymmetricKeyDetails?.namedCurve;
  throw new Error(
    `unsupported CA key type ${keyObject.asymmetricKeyType}${curve ? ` (${curve})` : ""}; ` +
      "use an EC P-256/P-384/P-521 or RSA key",
  );
}

export function withTrailingNewline(pem: string): string {
  return pem.endsWith("\n") ? pem : `${pem}\n`;
}
