/**
 * Where the agent's bearer token comes from. A token file is read again on every connect attempt:
 * kubelet rotates projected service-account tokens in place, and a token read once at startup
 * would expire under a long-running agent.
 */
import { readFile } from "node:fs/promises";
import { ConfigError } from "../errors.js";

/** Resolves to the token to send, or undefined when the agent authenticates by certificate only. */
export type TokenSource = () => Promise<string | undefined>;

export interface TokenSettings {
  /** File to read on each call; wins when set. */
  tokenPath: string;
  /** Inline token; "" for none. */
  token: string;
}

export function createTokenSource(settings: TokenSettings): TokenSource {
  if (settings.tokenPath) return () => readTokenFile(settings.tokenPath);
  const inline = settings.token || undefined;
  return async () => inline;
}

export async function readTokenFile(path: string): Promise<string> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    throw new ConfigError(`--service-account-token-path: cannot read ${path}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  // A trailing newline (hand-made files, `echo`) would be an invalid header value.
  const token = text.trim();
  if (token === "") throw new ConfigError(`--service-account-token-path: ${path} is empty`);
  return token;
}
