/**
 * The `aws` on the PATH of the DEPLOY.md command test (test/integration/deploy-runbook.test.ts):
 * the AWS CLI as far as the runbook's runnable commands use it, answered by local stand-ins.
 *
 *  - `cloudformation describe-stacks --stack-name S --query "…[?OutputKey=='K'].OutputValue"
 *    --output text`: an output of the synthesized template (cdk.out/S.template.json in the working
 *    directory), with its value from KGW_RUNBOOK_VALUES (JSON) or `stand-in-K`; an output the
 *    template does not have fails (the real CLI would print "None" and the runbook go on with it);
 *  - `secretsmanager put-secret-value --secret-id ID --secret-string file://F`: to the Secrets
 *    Manager stand-in at AWS_ENDPOINT_URL_SECRETS_MANAGER.
 *
 * Anything else exits 97: the command needs an AWS account, and the test should not have run it.
 */
import { readFileSync } from "node:fs";

const args = process.argv.slice(2);
const flag = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const fail = (code, message) => {
  process.stderr.write(`aws (runbook stand-in): ${message}\n`);
  process.exit(code);
};

if (args[0] === "cloudformation" && args[1] === "describe-stacks") {
  const stack = flag("--stack-name");
  const key = /OutputKey=='([^']+)'/.exec(flag("--query") ?? "")?.[1];
  if (!stack || !key || flag("--output") !== "text") fail(2, `unexpected describe-stacks: ${args.join(" ")}`);
  let template;
  try {
    template = JSON.parse(readFileSync(`cdk.out/${stack}.template.json`, "utf8"));
  } catch {
    fail(255, `no synthesized stack ${stack} in cdk.out (synthesize the app first)`);
  }
  if (!template.Outputs?.[key]) fail(255, `stack ${stack} has no output ${key}`);
  const values = JSON.parse(process.env.KGW_RUNBOOK_VALUES ?? "{}");
  process.stdout.write(`${values[key] ?? `stand-in-${key}`}\n`);
} else if (args[0] === "secretsmanager" && args[1] === "put-secret-value") {
  const id = flag("--secret-id");
  const source = flag("--secret-string") ?? "";
  if (!id || !source.startsWith("file://")) fail(2, `unexpected put-secret-value: ${args.join(" ")}`);
  const res = await fetch(process.env.AWS_ENDPOINT_URL_SECRETS_MANAGER, {
    method: "POST",
    headers: {
      "content-type": "application/x-amz-json-1.1",
      "x-amz-target": "secretsmanager.PutSecretValue",
    },
    body: JSON.stringify({
      SecretId: id,
      SecretString: readFileSync(source.slice("file://".length), "utf8"),
    }),
  });
  const body = await res.text();
  if (!res.ok) fail(254, `PutSecretValue ${id}: ${res.status} ${body}`);
  process.stdout.write(`${body}\n`);
} else {
  fail(97, `needs an AWS account, not run here: aws ${args.join(" ")}`);
}
