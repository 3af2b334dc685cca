import { ConfigError } from "../errors.js";

/**
 * A secret id as Secrets Manager takes it: a name (letters, digits and /_+=.@-, at most 512) or
 * an ARN. Checked before any request so that a typo is a usage error, not an AWS error. Kept
 * apart from ca-secret.ts so that flag parsing does not load the AWS SDK.
 */
const SECRET_ID =
  /^(arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[\w/+=.@-]{1,512}|[\w/+=.@-]{1,512})$/;

export function checkSecretId(id: string, flag = "--ca-secret"): string {
  if (!SECRET_ID.test(id)) throw new ConfigError(`${flag}: "${id.slice(0, 80)}" is not a secret name or ARN`);
  return id;
}
