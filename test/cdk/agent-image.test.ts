/**
 * Which agent image the deployed gateway's install route puts in tenants' manifests, as the
 * task definition's command shows it: the published image of this version (by digest when the
 * checkout holds the release's release.json, by tag without), or kgw:agentImage (a mirror).
 */
import { describe, expect, it } from "vitest";
import { DeployConfigError, readDeployConfig } from "../../cdk/lib/deploy-config.js";
import { gatewayCommand } from "../../cdk/lib/gateway-command.js";
import { KGW_IMAGE_REPOSITORY, KGW_VERSION } from "../../lib/tenancy/manifest/images.js";
import { formatReleaseStamp } from "../../lib/tenancy/manifest/release-stamp.js";
import { testContext } from "./fixtures.js";

const DIGEST = `sha256:${"a1".repeat(32)}`;
const STAMP = formatReleaseStamp({ version: KGW_VERSION, repository: KGW_IMAGE_REPOSITORY, digest: DIGEST });
const MIRROR = `123456789012.dkr.ecr.eu-west-1.amazonaws.com/kgw@${DIGEST}`;

const installedImage = (overrides: Record<string, unknown>, stamp: string | null) => {
  const context = testContext(overrides);
  const config = readDeployConfig((key) => context[key.replace(/^kgw:/, "")], {}, stamp);
  const command = gatewayCommand({
    tableName: "t",
    domainName: config.domainName,
    gracefulShutdownSeconds: config.gracefulShutdownSeconds,
    agentImage: config.agentImage,
  });
  const flags = command.filter((arg) => arg.startsWith("--install-agent-image="));
  expect(flags).toHaveLength(1);
  return flags[0]!.slice("--install-agent-image=".length);
};

describe("the agent image tenants install", () => {
  it("is this version's published image by tag in a checkout without release.json", () => {
    expect(installedImage({}, null)).toBe(`${KGW_IMAGE_REPOSITORY}:${KGW_VERSION}`);
  });

  it("is the published image by digest with the release's release.json", () => {
    expect(installedImage({}, STAMP)).toBe(`${KGW_IMAGE_REPOSITORY}@${DIGEST}`);
  });

  it("is kgw:agentImage when given (a mirror), whatever the stamp says", () => {
    expect(installedImage({ agentImage: MIRROR }, STAMP)).toBe(MIRROR);
    expect(installedImage({ agentImage: MIRROR }, null)).toBe(MIRROR);
  });

  it("refuses to deploy with the release.json of another release, saying which", () => {
    const other = formatReleaseStamp({ version: "9.9.9", repository: KGW_IMAGE_REPOSITORY, digest: DIGEST });
    expect(() => installedImage({}, other)).toThrow(DeployConfigError);
    expect(() => installedImage({}, other)).toThrow(/release\.json is the stamp of release 9\.9\.9/);
    expect(() => installedImage({}, "{")).toThrow(/release\.json: not JSON/);
  });
});
