/**
 * The CDK app: `npx cdk synth|deploy` (cdk.json runs this file). Context and the environment are
 * read here, once; the stacks get a plain DeployConfig.
 */
import { App } from "aws-cdk-lib";
import { DeployConfigError, readDeployConfig } from "../lib/deploy-config.js";
import { buildKgwApp } from "../lib/kgw-app.js";

const app = new App();
try {
  buildKgwApp(
    app,
    readDeployConfig((key) => app.node.tryGetContext(key), process.env),
  );
} catch (err) {
  if (!(err instanceof DeployConfigError)) throw err;
  process.stderr.write(`kgw cdk: ${err.message}\n(docs/DEPLOY.md lists the context keys)\n`);
  process.exit(2);
}
app.synth();
