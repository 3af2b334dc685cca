/**
 * `renderAgentManifest`: a tenant's agent install as one YAML stream for `kubectl apply -f`. Pure:
 * no store, no clock, no files. The caller supplies the token (`mintAgentToken`, or the install
 * route's own), so this can be called wherever the input can be built.
 */
import { type AgentManifestInput, checkManifestInput } from "./input.js";
import { agentManifestObjects, TOKEN_SECRET_NAME } from "./objects.js";
import { yamlStream } from "./yaml.js";

export function renderAgentManifest(input: AgentManifestInput): string {
  const spec = checkManifestInput(input);
  const { host, port } = spec.gateway;
  const address = host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
  return yamlStream(agentManifestObjects(spec), [
    `${spec.flavor === "kgw" ? "The kgw agent" : "Upstream's proxy-agent"} for tenant ${spec.tenantId} (${spec.replicas} replicas, namespace ${spec.namespace}),`,
    `dialing out to ${address}. Apply with: kubectl apply -f <this file>`,
    `It holds an agent token (Secret ${TOKEN_SECRET_NAME}, token id ${spec.agentTokenId}):`,
    "keep it as you would a password, and revoke the token id if it leaks.",
  ]);
}
