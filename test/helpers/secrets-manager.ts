/**
 * A stand-in for AWS Secrets Manager on 127.0.0.1, as far as kgw and the runbook use it: the JSON
 * protocol's `secretsmanager.GetSecretValue` and `secretsmanager.PutSecretValue` (AWS JSON 1.1,
 * the operation in X-Amz-Target), with the service's own error shapes, so the real SDK client is
 * tested, pointed here by AWS_ENDPOINT_URL_SECRETS_MANAGER with dummy credentials. Nothing is
 * signed or checked: `deny(id)` makes a secret answer AccessDeniedException instead.
 *
 * Secrets are created empty by `create(name)` (the stack creates them holding "{}"), addressed by
 * name or by the ARN it returns.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";

const REGION = "eu-west-1";
const ACCOUNT = "123456789012";

export interface LocalSecretsManager {
  /** http://127.0.0.1:<port> */
  readonly endpoint: string;
  /** The SDK's standard configuration for a child process (endpoint, region, dummy credentials). */
  readonly env: Readonly<Record<string, string>>;
  /** Creates a secret holding `value` (default "{}", as the stack does); returns its ARN. */
  create(name: string, value?: string): string;
  /** The current value, by name or ARN; undefined when there is no such secret. */
  value(id: string): string | undefined;
  /** Every value it held, oldest first (the one it was created with included). */
  history(id: string): readonly string[];
  /** From now on, every request for this secret is refused with AccessDeniedException. */
  deny(id: string): void;
  /** Requests by operation, to check what a command asked. */
  readonly calls: Map<string, number>;
  close(): Promise<void>;
}

interface Secret {
  name: string;
  arn: string;
  value: string;
  version: number;
  history: string[];
  denied: boolean;
}

export async function startLocalSecretsManager(): Promise<LocalSecretsManager> {
  const secrets = new Map<string, Secret>();
  const calls = new Map<string, number>();
  const find = (id: string) => secrets.get(id) ?? [...secrets.values()].find((s) => s.arn === id);

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const target = String(req.headers["x-amz-target"] ?? "");
      const op = target.replace(/^secretsmanager\./, "");
      calls.set(op, (calls.get(op) ?? 0) + 1);
      const answer = (status: number, body: object) => {
        res.writeHead(status, { "content-type": "application/x-amz-json-1.1" });
        res.end(JSON.stringify(body));
      };
      const fail = (type: string, message: string) => answer(400, { __type: type, message });
      let input: { SecretId?: string; SecretString?: string };
      try {
        input = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}");
      } catch {
        return fail("InvalidRequestException", "not JSON");
      }
      const secret = find(input.SecretId ?? "");
      if (!secret)
        return fail("ResourceNotFoundException", "Secrets Manager can't find the specified secret.");
      if (secret.denied) {
        return fail(
          "AccessDeniedException",
          `User: arn:aws:iam::${ACCOUNT}:user/test is not authorized to perform: ${target} on resource: ${secret.arn}`,
        );
      }
      const ids = { ARN: secret.arn, Name: secret.name, VersionId: `v${secret.version}` };
      switch (op) {
        case "GetSecretValue":
          return answer(200, { ...ids, SecretString: secret.value, CreatedDate: Date.now() / 1000 });
        case "PutSecretValue":
          if (typeof input.SecretString !== "string")
            return fail("InvalidParameterException", "no SecretString");
          secret.value = input.SecretString;
          secret.history.push(secret.value);
          secret.version++;
          return answer(200, { ...ids, VersionId: `v${secret.version}`, VersionStages: ["AWSCURRENT"] });
        default:
          return fail("UnknownOperationException", `the stand-in does not serve ${target}`);
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    endpoint,
    env: {
      AWS_ENDPOINT_URL_SECRETS_MANAGER: endpoint,
      AWS_REGION: REGION,
      AWS_ACCESS_KEY_ID: "kgw-test",
      AWS_SECRET_ACCESS_KEY: "kgw-test",
      AWS_EC2_METADATA_DISABLED: "true",
    },
    create(name, value = "{}") {
      const arn = `arn:aws:secretsmanager:${REGION}:${ACCOUNT}:secret:${name}-AbCdEf`;
      secrets.set(name, { name, arn, value, version: 1, history: [value], denied: false });
      return arn;
    },
    value: (id) => find(id)?.value,
    history: (id) => find(id)?.history ?? [],
    deny(id) {
      const s = find(id);
      if (s) s.denied = true;
    },
    calls,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
