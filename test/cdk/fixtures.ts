/**
 * Fixed configurations for the CDK tests: no AWS account, no credentials, no network. The
 * account and region are fixed so the templates are the same on every machine.
 */
import { App } from "aws-cdk-lib";
import { type DeployConfig, readDeployConfig } from "../../cdk/lib/deploy-config.js";
import { buildKgwApp, type KgwStacks } from "../../cdk/lib/kgw-app.js";

export const TEST_ACCOUNT = "123456789012";
export const TEST_REGION = "eu-west-1";
export const TEST_DOMAIN = "gateway.example.com";

/** A context as cdk.json or `-c` would give it (keys without the kgw: prefix). */
export function testContext(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    account: TEST_ACCOUNT,
    region: TEST_REGION,
    domainName: TEST_DOMAIN,
    hostedZoneId: "Z0123456789ABCDEFGHIJ",
    hostedZoneName: "example.com",
    // A registry image, not the Dockerfile asset: synthesizing an asset copies the repository.
    image: "ghcr.io/konnectivity-gateway/kgw:0.1.0",
    ...overrides,
  };
}

export function testConfig(overrides: Record<string, unknown> = {}): DeployConfig {
  const context = testContext(overrides);
  return readDeployConfig((key) => context[key.replace(/^kgw:/, "")]);
}

/** The feature flags cdk.json sets, so tests synthesize what `cdk synth` does. */
export const APP_CONTEXT = { "@aws-cdk/core:defaultCrossStackReferences": "strong" };

export function synthStacks(overrides: Record<string, unknown> = {}): KgwStacks {
  const app = new App({ context: APP_CONTEXT });
  return buildKgwApp(app, testConfig(overrides));
}
