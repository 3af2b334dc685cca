/**
 * Container images of the agent and the grammar their references must follow.
 *
 * Our image is the repository's Dockerfile, built and pushed for amd64 and arm64 by the release
 * workflow (.github/workflows/release.yml, docs/DEPLOY.md "Images"): it puts `kgw` on the PATH
 * and runs as UID 65532, so the container command is `kgw agent …` whatever the image's
 * entrypoint. Upstream's proxy-agent image is distroless `nonroot` (UID 65532) with the
 * binary at `/proxy-agent`.
 */

/**
 * The version of this package, which tags our image. Kept in step with package.json by a test
 * (tenant-manifest.test.ts): reading package.json at run time would find a different relative path
 * from lib/ and from dist/lib/.
 */
export const KGW_VERSION = "0.1.0";

/**
 * Where the release workflow publishes the image, for every platform under one name: its
 * IMAGE_REPOSITORY (.github/workflows/release.yml), which a unit test keeps equal to this.
 */
export const KGW_IMAGE_REPOSITORY = "ghcr.io/konnectivity-gateway/kgw";

/**
 * This version's image by its tag, the default where no release stamp says its digest
 * (release-stamp.ts): a tag the release pushed once and never moves, but a registry could.
 */
export const DEFAULT_KGW_AGENT_IMAGE = `${KGW_IMAGE_REPOSITORY}:${KGW_VERSION}`;

/** The upstream release our interop suites run against (test/interop/go.mod pins the same). */
export const DEFAULT_UPSTREAM_AGENT_IMAGE = "registry.k8s.io/kas-network-proxy/proxy-agent:v0.36.0";

/** Longest repository name the registry grammar allows (distribution/reference NameTotalLengthMax). */
const MAX_NAME_LENGTH = 255;

// distribution/reference's grammar (reference.go), spelled out part by part.
const PATH_COMPONENT = "[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*";
const DOMAIN_COMPONENT = "(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])";
const DOMAIN = `(?:${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*|\\[[a-fA-F0-9:]+\\])(?::[0-9]+)?`;
const NAME = `(?:${DOMAIN}/)?${PATH_COMPONENT}(?:/${PATH_COMPONENT})*`;
const TAG = "[\\w][\\w.-]{0,127}";
const DIGEST = "[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}";
const REFERENCE = new RegExp(`^(${NAME})(?::(${TAG}))?(?:@(${DIGEST}))?$`);

/**
 * Why `image` is not a usable reference, or undefined if it is. A tag or a digest is required: an
 * untagged image is `:latest`, which changes under a running Deployment and makes two replicas
 * run different agents.
 */
export function imageReferenceProblem(image: string): string | undefined {
  const m = REFERENCE.exec(image);
  if (!m) return "not an image reference (registry/repository:tag or …@sha256:digest)";
  if (m[1]!.length > MAX_NAME_LENGTH)
    return `the repository name is longer than ${MAX_NAME_LENGTH} characters`;
  if (m[2] === undefined && m[3] === undefined)
    return "give a tag or a digest (an untagged image is :latest)";
  return undefined;
}
