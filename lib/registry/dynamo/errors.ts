/**
 * The one place that reads the SDK's errors. A failed condition is an outcome the caller names
 * (a conflict, a superseded claim); everything else that comes out of the SDK after its retries
 * (unreachable, throttled, timed out, missing table, bad credentials) means "the store cannot be
 * used now" and becomes the caller's ERR_STORE_UNAVAILABLE error, with a short reason.
 */
import { ConditionalCheckFailedException } from "@aws-sdk/client-dynamodb";

export function isConditionFailed(err: unknown): boolean {
  return err instanceof ConditionalCheckFailedException;
}

/** A one-line reason for logs and CLI output: the SDK error's name, code and message, bounded. */
export function describeDynamoError(err: unknown): string {
  if (!(err instanceof Error)) return String(err).slice(0, 200);
  const code = (err as { code?: unknown }).code;
  const attempts = (err as { $metadata?: { attempts?: number } }).$metadata?.attempts;
  const parts = [err.name, typeof code === "string" && code !== err.name ? code : undefined, err.message];
  const text = parts.filter((p) => p).join(": ");
  const bounded = text.length > 300 ? `${text.slice(0, 300)}…` : text;
  return attempts && attempts > 1 ? `${bounded} (after ${attempts} attempts)` : bounded;
}
