/**
 * Writes the files the release workflow attaches to a GitHub release once the image is pushed:
 * release.json (the release stamp, lib/tenancy/manifest/release-stamp.ts) and release-notes.md
 * (scripts/release-notes.ts). Refuses a version other than this checkout's, so that a tag that
 * does not match package.json never gets a release.
 *
 *   npx tsx scripts/release-files.ts --version 1.2.3 --repository ghcr.io/owner/kgw \
 *     --digest sha256:… --server-url https://github.com --source owner/name --out dist/release
 */
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { ConfigError } from "../lib/errors.js";
import { KGW_VERSION } from "../lib/tenancy/manifest/images.js";
import {
  checkReleaseStamp,
  formatReleaseStamp,
  RELEASE_STAMP_FILE,
} from "../lib/tenancy/manifest/release-stamp.js";
import { renderReleaseNotes } from "./release-notes.js";

export const RELEASE_NOTES_FILE = "release-notes.md";

function main(argv: string[]): number {
  const { values } = parseArgs({
    args: argv,
    options: {
      version: { type: "string" },
      repository: { type: "string" },
      digest: { type: "string" },
      "server-url": { type: "string", default: "https://github.com" },
      source: { type: "string" },
      out: { type: "string" },
    },
    strict: true,
  });
  const missing = (["version", "repository", "digest", "source", "out"] as const).filter((k) => !values[k]);
  if (missing.length > 0) {
    process.stderr.write(`release-files: missing ${missing.map((k) => `--${k}`).join(", ")}\n`);
    return 2;
  }
  const stamp = checkReleaseStamp({
    version: values.version,
    repository: values.repository,
    digest: values.digest,
  });
  if (stamp.version !== KGW_VERSION) {
    process.stderr.write(
      `release-files: the tag says ${stamp.version}, but this checkout is ${KGW_VERSION} (package.json)\n`,
    );
    return 1;
  }
  const out = values.out!;
  mkdirSync(out, { recursive: true });
  writeFileSync(path.join(out, RELEASE_STAMP_FILE), formatReleaseStamp(stamp));
  writeFileSync(
    path.join(out, RELEASE_NOTES_FILE),
    renderReleaseNotes(stamp, { serverUrl: values["server-url"]!, repository: values.source! }),
  );
  return 0;
}

try {
  process.exitCode = main(process.argv.slice(2));
} catch (err) {
  if (!(err instanceof ConfigError) && !(err instanceof TypeError)) throw err;
  // A bad digest or repository from the workflow's outputs, or an unknown flag (parseArgs).
  process.stderr.write(`release-files: ${err.message}\n`);
  process.exitCode = 2;
}
