/**
 * The agent manifest: what a tenant's cluster applies to run its agents. `renderAgentManifest`
 * is pure and takes a plain object; `kgw tenant manifest` and the install route
 * (`GET /v1/install/<token>.yaml`) each build that object and supply a token.
 */

export { InvalidManifestInputError, type ManifestField } from "./errors.js";
export { DEFAULT_KGW_AGENT_IMAGE, DEFAULT_UPSTREAM_AGENT_IMAGE } from "./images.js";
export { AGENT_FLAVORS, type AgentFlavor, type AgentManifestInput, checkManifestInput } from "./input.js";
export { type MintedAgentToken, mintAgentToken } from "./mint-agent-token.js";
export { renderAgentManifest } from "./render.js";
