/**
 * The release stamp: what the release workflow knows only after it pushed the image, namely the
 * digest the registry gave it. The workflow writes it as `release.json` and attaches it to the
 * GitHub release; an operator who puts that file at the root of their checkout of the release
 * gets manifests that pin the agent image by digest (`repository@sha256:…`). Without it (a
 * development build, or a checkout of a tag without the file) the default names the tag.
 *
 * The image cannot carry its own stamp: the digest is a hash of the image, so writing it into the
 * image would change it. Hence a file beside the sources, read by the entrypoints that need it
 * (the CDK app), never by the running gateway.
 */
import { ConfigError } from "../../errors.js";
import { DEFAULT_KGW_AGENT_IMAGE, imageReferenceProblem, KGW_VERSION } from "./images.js";

/** Its name at the root of the package (and of the GitHub release's assets). */
export const RELEASE_STAMP_FILE = "release.json";

/** Registries content-address images with SHA-256; buildx and cosign report it this way. */
const SHA256_DIGEST = /^sha256:[0-9a-f]{64}$/;

export interface ReleaseStamp {
  /** The package version released (the tag without its `v`). */
  readonly version: string;
  /** Where the image was pushed, without tag or digest (the workflow's IMAGE_REPOSITORY). */
  readonly repository: string;
  /** The digest of the image index (every platform's manifest under one digest). */
  readonly digest: string;
}

/** Checks a stamp's fields, whether it came from a file or from the workflow's outputs. */
export function checkReleaseStamp(value: unknown): ReleaseStamp {
  const fail = (why: string) => new ConfigError(`${RELEASE_STAMP_FILE}: ${why}`);
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw fail("not a JSON object");
  const { version, repository, digest } = value as Record<string, unknown>;
  if (typeof version !== "string" || !/^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?$/.test(version)) {
    throw fail("version: not a release version (1.2.3 or 1.2.3-rc.1)");
  }
  if (typeof repository !== "string" || repository.includes("@") || /:[^/]*$/.test(repository)) {
    throw fail("repository: a repository name without tag or digest");
  }
  const problem = imageReferenceProblem(`${repository}:${version}`);
  if (problem) throw fail(`repository: ${problem}`);
  if (typeof digest !== "string" || !SHA256_DIGEST.test(digest)) {
    throw fail("digest: not a sha256 digest (sha256: and 64 lower-case hex digits)");
  }
  return { version, repository, digest };
}

/** A stamp from the text of release.json. */
export function parseReleaseStamp(text: string): ReleaseStamp {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new ConfigError(`${RELEASE_STAMP_FILE}: not JSON`, { cause: err });
  }
  return checkReleaseStamp(value);
}

/** release.json's text: what parseReleaseStamp reads back. */
export function formatReleaseStamp(stamp: ReleaseStamp): string {
  const { version, repository, digest } = checkReleaseStamp(stamp);
  return `${JSON.stringify({ version, repository, digest }, null, 2)}\n`;
}

/**
 * The kgw agent image manifests name by default: the released image by digest when a stamp of
 * this version is known, else this version's tag. A stamp of another version is refused rather
 * than ignored: it would pin agents to a different release than the gateway serving them.
 */
export function defaultKgwAgentImage(stamp: ReleaseStamp | null): string {
  if (stamp === null) return DEFAULT_KGW_AGENT_IMAGE;
  if (stamp.version !== KGW_VERSION) {
    throw new ConfigError(
      `${RELEASE_STAMP_FILE} is the stamp of release ${stamp.version}, not of this version (${KGW_VERSION}): use the one of ${KGW_VERSION}, or remove it to name the tag`,
    );
  }
  return `${stamp.repository}@${stamp.digest}`;
}
