/**
 * What the tenant commands write to and ask: given by the entrypoint (services/tenant) or a test,
 * and shared by the subcommands' pieces (show-tenant.ts, confirm-change.ts) without a loop back
 * to the dispatcher.
 */
import type { Prompter } from "../confirm.js";

export interface TenantCliIo {
  out(text: string): void;
  err(text: string): void;
  /** The clock; tests move it. */
  now?: () => Date;
  /** Who confirms delete and revoke without --yes; default: nobody (they refuse). */
  prompter?: Prompter;
}

/** The same with every default filled in (run-tenant-command.ts does it once). */
export type Io = Required<TenantCliIo>;
