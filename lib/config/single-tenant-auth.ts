import { ConfigError } from "../errors.js";

/** The server flags the drop-in's check reads (a slice of SERVER_FLAGS' values). */
export interface SingleTenantAuthFlags {
  "tenant-ca-cert": string;
  "uds-tenant": string;
  "uds-name": string;
  "server-cert": string;
  "server-ca-cert": string;
  "allow-anonymous-callers": boolean;
  "insecure-frontend": boolean;
  "cluster-ca-cert": string;
  "agent-token-file": string;
  "agent-token": string;
}

/** What the single-tenant drop-in needs: callers and agents must each have a way to authenticate. */
export function checkSingleTenantAuth(f: SingleTenantAuthFlags): void {
  for (const flag of ["tenant-ca-cert", "uds-tenant"] as const) {
    if (f[flag]) throw new ConfigError(`--${flag} needs --tenant-store-dir`);
  }
  // Anyone who can open a tunnel reaches everything the agents reach, so a TCP frontend without
  // caller authentication is never a default. Upstream refuses TCP without --server-ca-cert.
  if (f["allow-anonymous-callers"] && f["server-ca-cert"]) {
    throw new ConfigError(
      "--allow-anonymous-callers contradicts --server-ca-cert (which requires client certificates); choose one",
    );
  }
  if (f["allow-anonymous-callers"] && !f["server-cert"] && !f["insecure-frontend"]) {
    throw new ConfigError(
      "--allow-anonymous-callers applies to the TCP frontend (--server-cert); the Unix socket is protected by its file permissions",
    );
  }
  if (f["server-cert"] && !f["server-ca-cert"] && !f["allow-anonymous-callers"]) {
    throw new ConfigError(
      "--server-cert without --server-ca-cert lets anyone who reaches the frontend open tunnels: give --server-ca-cert (mTLS) or, to accept anonymous callers on purpose, --allow-anonymous-callers",
    );
  }
  if (!f["server-cert"] && !f["insecure-frontend"] && !f["uds-name"]) {
    throw new ConfigError(
      "the frontend needs --server-cert/--server-key (TLS), --uds-name (Unix socket) or, for tests only, --insecure-frontend",
    );
  }
  if (!f["cluster-ca-cert"] && !f["agent-token-file"] && !f["agent-token"]) {
    throw new ConfigError(
      "agents must authenticate: give --cluster-ca-cert (mTLS), --agent-token-file or $KGW_AGENT_TOKEN",
    );
  }
}
