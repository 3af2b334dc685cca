/**
 * What `kgw tenant revoke` and `delete` check before they ask, and the asking: a destructive
 * change goes ahead only when confirmed (lib/commands/confirm.ts); otherwise it says why not.
 */
import type { TenantRecord } from "../../tenancy/model.js";
import { findCredential } from "../../tenancy/operations.js";
import { normalizeSerial } from "../../tenancy/tenant-uri.js";
import { type ConfirmationRequest, confirm, notConfirmedMessage } from "../confirm.js";
import { EXIT } from "../exit-codes.js";
import type { TenantCommand } from "./parse-tenant-command.js";
import type { Io } from "./tenant-io.js";

/** A credential id as typed, or as a serial printed with colons or leading zeros (openssl does both). */
export function credentialIdIn(record: TenantRecord, typed: string): string {
  if (findCredential(record, typed) || record.installTokens.some((t) => t.id === typed)) return typed;
  return normalizeSerial(typed) ?? typed;
}

/** EXIT.OK when confirmed; otherwise says why nothing happened and gives the exit code. */
export async function confirmOrSay(
  command: Extract<TenantCommand, { yes: boolean }>,
  request: ConfirmationRequest,
  io: Io,
): Promise<number> {
  const outcome = await confirm(request, command.yes, io.prompter);
  if (outcome === "confirmed") return EXIT.OK;
  io.err(`kgw tenant ${command.name}: ${notConfirmedMessage(outcome)}\n`);
  return EXIT.NOT_CONFIRMED;
}
