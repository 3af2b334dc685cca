/**
 * The default kgw agent image: this version's tag in a development build, the released image by
 * digest once the release's stamp (release.json) is at hand; and the files the release workflow
 * attaches (scripts/release-files.ts), which an operator reads and the CDK app reads back.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { ConfigError } from "../../lib/errors.js";
import {
  imageReferenceProblem,
  KGW_IMAGE_REPOSITORY,
  KGW_VERSION,
} from "../../lib/tenancy/manifest/images.js";
import {
  defaultKgwAgentImage,
  formatReleaseStamp,
  parseReleaseStamp,
  type ReleaseStamp,
} from "../../lib/tenancy/manifest/release-stamp.js";
import { renderReleaseNotes, signingIdentity } from "../../scripts/release-notes.js";

const DIGEST = `sha256:${"0123456789abcdef".repeat(4)}`;
const stamp: ReleaseStamp = { version: KGW_VERSION, repository: KGW_IMAGE_REPOSITORY, digest: DIGEST };
const source = { serverUrl: "https://github.com", repository: "konnectivity-gateway/konnectivity-gateway" };

describe("the default kgw agent image", () => {
  it("is this version's tag in a development build (no stamp)", () => {
    expect(defaultKgwAgentImage(null)).toBe(`${KGW_IMAGE_REPOSITORY}:${KGW_VERSION}`);
  });

  it("is the released image by digest with the release's stamp", () => {
    const image = defaultKgwAgentImage(parseReleaseStamp(formatReleaseStamp(stamp)));
    expect(image).toBe(`${KGW_IMAGE_REPOSITORY}@${DIGEST}`);
    expect(imageReferenceProblem(image)).toBeUndefined();
  });

  it("follows the stamp's repository (a fork's release)", () => {
    expect(defaultKgwAgentImage({ ...stamp, repository: "ghcr.io/someone/kgw" })).toBe(
      `ghcr.io/someone/kgw@${DIGEST}`,
    );
  });

  it("refuses the stamp of another release rather than pin agents to it", () => {
    expect(() => defaultKgwAgentImage({ ...stamp, version: "9.9.9" })).toThrow(ConfigError);
    expect(() => defaultKgwAgentImage({ ...stamp, version: "9.9.9" })).toThrow(
      /stamp of release 9\.9\.9, not of this version/,
    );
  });

  it.each([
    ["not json", /not JSON/],
    ["[]", /not a JSON object/],
    [JSON.stringify({ ...stamp, version: "v1.2.3" }), /version/],
    [JSON.stringify({ ...stamp, repository: `${KGW_IMAGE_REPOSITORY}:1.0.0` }), /repository/],
    [JSON.stringify({ ...stamp, repository: "Not/A/Repo" }), /repository/],
    [JSON.stringify({ ...stamp, digest: "sha256:abc" }), /digest/],
    [JSON.stringify({ ...stamp, digest: DIGEST.toUpperCase() }), /digest/],
  ])("refuses a release.json that is not a stamp: %s", (text, why) => {
    expect(() => parseReleaseStamp(text)).toThrow(why);
  });
});

describe("the release's notes", () => {
  const notes = renderReleaseNotes(stamp, source);

  it("name the image by digest and say how to verify its signature with this release's identity", () => {
    expect(notes).toContain(`${KGW_IMAGE_REPOSITORY}@${DIGEST}`);
    expect(signingIdentity(stamp, source)).toBe(
      `https://github.com/konnectivity-gateway/konnectivity-gateway/.github/workflows/release.yml@refs/tags/v${KGW_VERSION}`,
    );
    expect(notes).toContain(
      `cosign verify ${KGW_IMAGE_REPOSITORY}@${DIGEST} \\\n  --certificate-identity '${signingIdentity(stamp, source)}' \\\n  --certificate-oidc-issuer https://token.actions.githubusercontent.com`,
    );
  });

  it("tell how to mirror it and pin the mirror by the same digest", () => {
    expect(notes).toContain(`crane copy ${KGW_IMAGE_REPOSITORY}@${DIGEST} `);
    expect(notes).toContain(`-c kgw:agentImage=<your repository>@${DIGEST}`);
  });
});

describe("scripts/release-files.ts", () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });
  const root = fileURLToPath(new URL("../..", import.meta.url));
  const runScript = (version: string) => {
    const out = mkdtempSync(path.join(tmpdir(), "kgw-release-"));
    dirs.push(out);
    const r = spawnSync(
      process.execPath,
      [
        "--import",
        "tsx",
        "scripts/release-files.ts",
        `--version=${version}`,
        `--repository=${KGW_IMAGE_REPOSITORY}`,
        `--digest=${DIGEST}`,
        `--source=${source.repository}`,
        `--out=${out}`,
      ],
      { cwd: root, encoding: "utf8" },
    );
    return { ...r, out };
  };

  it("writes a release.json the CDK app reads back, and the notes", () => {
    const r = runScript(KGW_VERSION);
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    const written = parseReleaseStamp(readFileSync(path.join(r.out, "release.json"), "utf8"));
    expect(written).toEqual(stamp);
    expect(readFileSync(path.join(r.out, "release-notes.md"), "utf8")).toBe(
      renderReleaseNotes(stamp, source),
    );
  });

  it("refuses a tag that is not this checkout's version", () => {
    const r = runScript("9.9.9");
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`the tag says 9.9.9, but this checkout is ${KGW_VERSION}`);
  });
});
