/**
 * The agent's command line in the Deployment: what an operator would type to run the agent by
 * hand, with the files where the pod mounts them. Both flavors take the same flags (our agent
 * keeps upstream proxy-agent's names and defaults, lib/config/agent-options.ts), so only the
 * executable differs.
 */
import path from "node:path";
import type { AgentFlavor } from "./input.js";

/** Where the Secret with the agent token is mounted, and the file (its key) in it. */
export const TOKEN_MOUNT_DIR = "/etc/kgw/token";
export const TOKEN_KEY = "token";
/** Where the ConfigMap with the gateway's CA bundle is mounted, and the file (its key) in it. */
export const CA_MOUNT_DIR = "/etc/kgw/ca";
export const CA_KEY = "ca.crt";

export const TOKEN_PATH = path.posix.join(TOKEN_MOUNT_DIR, TOKEN_KEY);
export const CA_PATH = path.posix.join(CA_MOUNT_DIR, CA_KEY);

/**
 * The health port (/healthz, /readyz) the probes use. Passed explicitly, so that the probes and
 * the agent agree even if a default changes; the value is the default of both agents (upstream
 * proxy-agent's, which `kgw agent` keeps), so the pod reads as an operator expects.
 */
export const HEALTH_PORT = 8093;

/** The container's environment variable holding the pod's name (downward API). */
export const POD_NAME_ENV = "POD_NAME";

/**
 * `command` overrides the image's entrypoint, so the line does not depend on how the image was
 * built: ours puts `kgw` on the PATH, upstream's has the binary at /proxy-agent.
 */
const EXECUTABLE: Readonly<Record<AgentFlavor, readonly string[]>> = {
  kgw: ["kgw", "agent"],
  upstream: ["/proxy-agent"],
};

export interface AgentCommand {
  readonly command: string[];
  readonly args: string[];
}

export function agentCommand(flavor: AgentFlavor, gateway: { host: string; port: number }): AgentCommand {
  return {
    command: [...EXECUTABLE[flavor]],
    args: [
      `--proxy-server-host=${gateway.host}`,
      `--proxy-server-port=${gateway.port}`,
      `--ca-cert=${CA_PATH}`,
      `--service-account-token-path=${TOKEN_PATH}`,
      // Kubernetes expands $(VAR) from the container's env: each pod registers under its own name,
      // unique in the namespace and stable for the pod's life, which is what the gateway keys on.
      `--agent-id=$(${POD_NAME_ENV})`,
      `--health-server-port=${HEALTH_PORT}`,
    ],
  };
}
