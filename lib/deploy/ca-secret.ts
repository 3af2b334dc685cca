/**
 * `--ca-secret`: the gateway CA read from AWS Secrets Manager with the operator's own AWS
 * credentials, instead of --ca-cert/--ca-key files on the operator's disk. The client comes from
 * the SDK's standard configuration (AWS_PROFILE, AWS_REGION, SSO, `AWS_ENDPOINT_URL_SECRETS_MANAGER`
 * …); nothing here signs or sends HTTP. The reader is injected so the handling of the secret's
 * shape and of every failure is tested without AWS (test/unit/deploy-ca-secret.test.ts). The
 * client is built without the SDK's Node.js version warning (lib/util/aws-sdk-node-warning.ts).
 */
import { GetSecretValueCommand, SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import { ConfigError, type ErrorCode, GatewayError } from "../errors.js";
import { loadCa } from "../pki/ca.js";
import type { CaPems } from "../pki/issue.js";
import { withoutNodeVersionWarning } from "../util/aws-sdk-node-warning.js";
import { checkSecretId } from "./secret-id.js";
import { parseCaSecret } from "./secret-layout.js";

export { checkSecretId };

/** Reads one secret's current string value. */
export interface SecretReader {
  getSecretString(secretId: string): Promise<string>;
}

/** How long one attempt may take: the CLI waits for it, and a wrong endpoint should fail fast. */
const SECRET_REQUEST_TIMEOUT_MS = 10_000;

export function secretsManagerReader(client?: SecretsManagerClient): SecretReader {
  const sm =
    client ??
    withoutNodeVersionWarning(
      () =>
        new SecretsManagerClient({
          requestHandler: { requestTimeout: SECRET_REQUEST_TIMEOUT_MS, throwOnRequestTimeout: true },
        }),
    );
  return {
    async getSecretString(secretId) {
      const out = await sm.send(new GetSecretValueCommand({ SecretId: secretId }));
      if (out.SecretString === undefined) {
        throw new ConfigError(
          `--ca-secret ${secretId}: the secret holds binary data, not the JSON kgw pki writes`,
        );
      }
      return out.SecretString;
    },
  };
}

/**
 * The code of an AWS error, for the exit code (lib/commands/exit-codes.ts): a secret that is not
 * there is not found (3), like a tenant; a refusal and anything else failed (1), since retrying or
 * other credentials may help and rewriting the command will not.
 */
const AWS_ERROR_CODES: Readonly<Record<string, ErrorCode>> = {
  ResourceNotFoundException: "ERR_NOT_FOUND",
  AccessDeniedException: "ERR_FORBIDDEN",
};

/** AWS errors the operator can act on, in their words; anything else keeps the SDK's message. */
const AWS_ERROR_HINTS: Readonly<Record<string, string>> = {
  ResourceNotFoundException: "no such secret in this account and region (check AWS_REGION)",
  AccessDeniedException:
    "your AWS credentials may not read it (secretsmanager:GetSecretValue, and kms:Decrypt for a customer key)",
  DecryptionFailure: "Secrets Manager cannot decrypt it with its KMS key",
  InvalidRequestException: "it cannot be read now (scheduled for deletion?)",
  CredentialsProviderError: "no AWS credentials found (AWS_PROFILE, aws sso login, or the environment)",
};

/**
 * The gateway CA from `secretId`, checked as --ca-cert/--ca-key files are (a CA that can sign,
 * with its own key). Usage problems and a value that is not a CA secret are ConfigErrors (exit 2);
 * AWS's answers are typed by AWS_ERROR_CODES.
 */
export async function readCaFromSecret(secretId: string, reader: SecretReader): Promise<CaPems> {
  const id = checkSecretId(secretId);
  let text: string;
  try {
    text = await reader.getSecretString(id);
  } catch (err) {
    if (err instanceof GatewayError) throw err;
    const name = (err as { name?: string }).name ?? "Error";
    const hint = AWS_ERROR_HINTS[name] ?? (err as Error).message;
    const code = AWS_ERROR_CODES[name] ?? "ERR_STORE_UNAVAILABLE";
    throw new GatewayError(code, `--ca-secret ${id}: ${name}: ${hint}`, { cause: err });
  }
  const value = parseCaSecret(text, `--ca-secret ${id}`);
  const pems = { certPem: value.certificate, keyPem: value.privateKey };
  try {
    loadCa(pems);
  } catch (err) {
    throw new ConfigError(`--ca-secret ${id}: ${(err as Error).message}`);
  }
  return pems;
}
