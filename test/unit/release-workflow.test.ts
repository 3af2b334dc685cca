/**
 * The GitHub workflows as an operator and a maintainer rely on them: the release publishes the
 * image where the code's default points, for both platforms, with SBOM, provenance and a keyless
 * signature of the pushed digest; every action is pinned by commit; each job holds only the
 * permissions it uses; CI runs .ci/run. actionlint (in .ci/run) checks the syntax and the
 * scripts; this checks the promises.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { DEFAULT_KGW_AGENT_IMAGE, KGW_IMAGE_REPOSITORY } from "../../lib/tenancy/manifest/images.js";

interface Step {
  name?: string;
  id?: string;
  uses?: string;
  run?: string;
  with?: Record<string, unknown>;
  env?: Record<string, string>;
}
interface Job {
  needs?: string | string[];
  permissions?: Record<string, string>;
  "timeout-minutes"?: number;
  steps: Step[];
}
interface Workflow {
  on: Record<string, unknown>;
  permissions?: Record<string, string>;
  concurrency?: { group: string; "cancel-in-progress": boolean };
  env?: Record<string, string>;
  jobs: Record<string, Job>;
}

const text = (name: string) =>
  readFileSync(new URL(`../../.github/workflows/${name}`, import.meta.url), "utf8");
const load = (name: string) => parse(text(name)) as Workflow;

const release = load("release.yml");
const ci = load("ci.yml");
/** A GitHub Actions expression, `${{ … }}`, as the workflow file spells it. */
const expr = (body: string) => `\${{ ${body} }}`;
const steps = (w: Workflow) => Object.values(w.jobs).flatMap((j) => j.steps);
const stepUsing = (w: Workflow, action: string) => steps(w).find((s) => s.uses?.startsWith(`${action}@`));

describe("the release workflow", () => {
  it("pushes to the repository the code's default agent image names", () => {
    expect(release.env?.IMAGE_REPOSITORY).toBe(KGW_IMAGE_REPOSITORY);
    expect(DEFAULT_KGW_AGENT_IMAGE.startsWith(`${KGW_IMAGE_REPOSITORY}:`)).toBe(true);
    const build = stepUsing(release, "docker/build-push-action")!;
    expect(build.with).toMatchObject({ push: true });
    expect(String(build.with?.tags)).toMatch(/^\$\{\{ env\.IMAGE_REPOSITORY \}\}:/);
    // The repository is named once: nowhere else in the file.
    expect(text("release.yml").split(KGW_IMAGE_REPOSITORY)).toHaveLength(2);
  });

  it("runs on version tags only", () => {
    expect(release.on).toEqual({ push: { tags: ["v*"] } });
  });

  it("builds both platforms with an SBOM and provenance attached", () => {
    const build = stepUsing(release, "docker/build-push-action")!;
    expect(String(build.with?.platforms).split(",")).toEqual(["linux/amd64", "linux/arm64"]);
    expect(build.with).toMatchObject({ sbom: true, provenance: "mode=max", context: "." });
  });

  it("runs the emulator and the builder it trusts with the release from images pinned by digest", () => {
    const pinned = /^docker\.io\/[\w/-]+:[\w.-]+@sha256:[0-9a-f]{64}$/;
    expect(String(stepUsing(release, "docker/setup-qemu-action")?.with?.image)).toMatch(pinned);
    const driverOpts = String(stepUsing(release, "docker/setup-buildx-action")?.with?.["driver-opts"]);
    expect(driverOpts.replace(/^image=/, "")).toMatch(pinned);
  });

  it("signs the digest it pushed, keyless, and verifies it as the docs tell operators to", () => {
    const image = release.jobs.image!;
    expect(stepUsing(release, "sigstore/cosign-installer")).toBeDefined();
    const sign = image.steps.find((s) => s.run?.includes("cosign sign"))!;
    expect(sign.run).toContain('"$IMAGE_REPOSITORY@$DIGEST"');
    expect(sign.env?.DIGEST).toBe(expr("steps.build.outputs.digest"));
    const verify = image.steps.find((s) => s.run?.includes("cosign verify"))!;
    expect(verify.run).toContain("--certificate-oidc-issuer https://token.actions.githubusercontent.com");
    expect(verify.run).toContain("/.github/workflows/release.yml@$GITHUB_REF");
  });

  it("renders release.json and the notes from the pushed digest and attaches them to the release", () => {
    const job = release.jobs.release!;
    expect(job.needs).toBe("image");
    const render = job.steps.find((s) => s.run?.includes("scripts/release-files.ts"))!;
    expect(render.env?.DIGEST).toBe(expr("needs.image.outputs.digest"));
    expect(release.jobs.image!.steps.find((s) => s.id === "build")).toBeDefined();
    const publish = job.steps.find((s) => s.run?.includes("gh release create"))!;
    expect(publish.run).toContain("release-out/release.json");
    expect(publish.run).toContain("--notes-file release-out/release-notes.md");
  });

  it("grants each job only what it uses, nothing at the top, and never cancels a release halfway", () => {
    expect(release.permissions).toEqual({});
    expect(release.jobs.image!.permissions).toEqual({
      contents: "read",
      packages: "write",
      "id-token": "write",
    });
    expect(release.jobs.release!.permissions).toEqual({ contents: "write" });
    expect(release.concurrency?.["cancel-in-progress"]).toBe(false);
  });
});

describe("the CI workflow", () => {
  it("runs .ci/run on pull requests and pushes to main, reading the repository only", () => {
    expect(Object.keys(ci.on).sort()).toEqual(["pull_request", "push"]);
    expect(ci.on.push).toEqual({ branches: ["main"] });
    expect(ci.permissions).toEqual({ contents: "read" });
    expect(
      steps(ci)
        .map((s) => s.run)
        .filter(Boolean),
    ).toEqual(["bash .ci/run"]);
    for (const action of ["actions/setup-node", "actions/setup-go", "actions/setup-python"]) {
      expect(stepUsing(ci, action), action).toBeDefined();
    }
  });
});

describe("both workflows", () => {
  it.each(["release.yml", "ci.yml"])("%s pins every action by commit, with its version beside it", (name) => {
    const uses = text(name)
      .split("\n")
      .filter((line) => /^\s*-?\s*uses:/.test(line));
    expect(uses.length).toBeGreaterThan(0);
    for (const line of uses) {
      expect(line).toMatch(/uses: [\w.-]+\/[\w.-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$/);
    }
  });

  it.each(["release.yml", "ci.yml"])(
    "%s gives every job a timeout and checks out without keeping the token",
    (name) => {
      for (const [id, job] of Object.entries(load(name).jobs)) {
        expect(job["timeout-minutes"], id).toBeGreaterThan(0);
        for (const step of job.steps.filter((s) => s.uses?.startsWith("actions/checkout@"))) {
          expect(step.with?.["persist-credentials"], id).toBe(false);
        }
      }
    },
  );
});
