/**
 * The notes of a GitHub release, rendered by the release workflow once the image is pushed and
 * signed: the image by digest (the reference every manifest of this release names), how to verify
 * its signature, where its SBOM and provenance are, how to mirror it and pin it. docs/DEPLOY.md
 * "Images" says the same in general; these name this release's digest and signing identity.
 */
import type { ReleaseStamp } from "../lib/tenancy/manifest/release-stamp.js";

/** Who signed: the GitHub Actions OIDC issuer, whose tokens cosign keyless exchanges for a certificate. */
export const GITHUB_OIDC_ISSUER = "https://token.actions.githubusercontent.com";

/** The workflow that publishes, relative to the repository: the signing certificate names it. */
export const RELEASE_WORKFLOW_PATH = ".github/workflows/release.yml";

export interface ReleaseSource {
  /** https://github.com, or a GitHub Enterprise server's URL. */
  serverUrl: string;
  /** owner/name of the repository the workflow ran in. */
  repository: string;
}

/**
 * The identity in the signing certificate of a release: the workflow file at the release's tag
 * (GitHub's OIDC `job_workflow_ref`, which Fulcio writes as the certificate's URI SAN).
 */
export function signingIdentity(stamp: ReleaseStamp, source: ReleaseSource): string {
  return `${source.serverUrl}/${source.repository}/${RELEASE_WORKFLOW_PATH}@refs/tags/v${stamp.version}`;
}

export function renderReleaseNotes(stamp: ReleaseStamp, source: ReleaseSource): string {
  const image = `${stamp.repository}@${stamp.digest}`;
  return `## kgw ${stamp.version}

One image runs the gateway (\`kgw server\`) and the agent (\`kgw agent\`), for linux/amd64 and
linux/arm64. Pin it by digest:

\`\`\`
${image}
\`\`\`

The tag \`${stamp.repository}:${stamp.version}\` names the same image. The digest is that of the
image index (both platforms); the registry holds its SBOM (SPDX) and build provenance (SLSA) as
attestations beside it, and a cosign signature made by this release's workflow.

### Verify the signature

\`\`\`sh
cosign verify ${image} \\
  --certificate-identity '${signingIdentity(stamp, source)}' \\
  --certificate-oidc-issuer ${GITHUB_OIDC_ISSUER}
\`\`\`

### SBOM and provenance

\`\`\`sh
docker buildx imagetools inspect ${image} --format '{{ json .SBOM }}'
docker buildx imagetools inspect ${image} --format '{{ json .Provenance }}'
\`\`\`

### Use it

- Agents: tenants' clusters pull it as it is. To serve it from your own registry, copy it there
  with every platform and attestation kept (the digest stays the same), then deploy with
  \`-c kgw:agentImage=<your repository>@${stamp.digest}\` (docs/DEPLOY.md, "Images"):

  \`\`\`sh
  crane copy ${image} <account>.dkr.ecr.<region>.amazonaws.com/kgw:${stamp.version}
  \`\`\`

- The CDK app: put the attached \`release.json\` at the root of your checkout of \`v${stamp.version}\`;
  without \`kgw:agentImage\`, the install manifests the gateway serves then name
  \`${image}\` instead of the tag.
`;
}
