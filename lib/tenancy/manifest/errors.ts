/**
 * Input to the agent manifest that cannot make a valid one. `field` names the input at fault, so
 * the install route (HTTP 400) and `kgw tenant manifest` (exit code 2) can both say which. The
 * message never quotes the agent token: it is a secret, whatever is wrong with it.
 */
import { GatewayError } from "../../errors.js";

export type ManifestField =
  | "tenantId"
  | "gateway"
  | "caPem"
  | "agentToken"
  | "image"
  | "namespace"
  | "replicas"
  | "flavor";

export class InvalidManifestInputError extends GatewayError {
  constructor(
    readonly field: ManifestField,
    /** What is wrong, without the field's name (a caller may name it its own way: a flag, a file). */
    readonly reason: string,
  ) {
    super("ERR_BAD_REQUEST", `agent manifest: ${field}: ${reason}`);
  }
}
