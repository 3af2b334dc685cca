/**
 * The CDK app: `npx cdk synth|deploy` (cdk.json runs this file). Context, the environment and the
 * release stamp (release.json at the checkout's root, if the operator put the release's there)
 * are read here, once; the stacks get a plain DeployConfig.
 */
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { App } from "aws-cdk-lib";
import { RELEASE_STAMP_FILE } from "../../lib/tenancy/manifest/release-stamp.js";
import { DeployConfigError, readDeployConfig } from "../lib/deploy-config.js";
import { buildKgwApp } from "../lib/kgw-app.js";

const stampFile = fileURLToPath(new URL(`../../${RELEASE_STAMP_FILE}`, import.meta.url));
const app = new App();
try {
  buildKgwApp(
    app,
    readDeployConfig(
      (key) => app.node.tryGetContext(key),
      process.env,
      existsSync(stampFile) ? readFileSync(stampFile, "utf8") : null,
    ),
  );
} catch (err) {
  if (!(err instanceof DeployConfigError)) throw err;
  process.stderr.write(`kgw cdk: ${err.message}\n(docs/DEPLOY.md lists the context keys)\n`);
  process.exit(2);
}
app.synth();
