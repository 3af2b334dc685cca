/**
 * Confirmation for destructive commands (`kgw tenant delete`, `kgw tenant revoke`): `--yes`
 * confirms; otherwise a person at a terminal is asked, and without a terminal (a script, a pipe,
 * CI) the command refuses, saying to pass --yes, rather than act on nobody's word.
 */

/** How to reach the person, if there is one; the entrypoint builds it from its stdin and stderr. */
export interface Prompter {
  /** Whether standard input and standard error are a terminal. */
  interactive: boolean;
  /** Writes the question and resolves with the line typed (undefined: the input ended). */
  ask(question: string): Promise<string | undefined>;
}

/** No terminal: every confirmation is refused unless --yes was given. */
export const NO_TERMINAL: Prompter = { interactive: false, ask: async () => undefined };

export interface ConfirmationRequest {
  /** What is about to happen, as one sentence: "Delete tenant acme: all its credentials stop working." */
  action: string;
  /** The answer that confirms: "yes" accepts y or yes; anything else must be typed exactly. */
  expect: "yes" | { exactly: string };
}

export type Confirmation = "confirmed" | "declined" | "no-terminal";

export async function confirm(
  request: ConfirmationRequest,
  yes: boolean,
  prompter: Prompter,
): Promise<Confirmation> {
  if (yes) return "confirmed";
  if (!prompter.interactive) return "no-terminal";
  const question =
    request.expect === "yes"
      ? `${request.action}\nContinue? [y/N] `
      : `${request.action}\nType ${request.expect.exactly} to confirm: `;
  const answer = (await prompter.ask(question))?.trim();
  if (answer === undefined) return "declined";
  const ok = request.expect === "yes" ? /^(y|yes)$/i.test(answer) : answer === request.expect.exactly;
  return ok ? "confirmed" : "declined";
}

/** The one line printed when a command did not act for want of confirmation. */
export function notConfirmedMessage(outcome: Exclude<Confirmation, "confirmed">): string {
  return outcome === "no-terminal"
    ? "not confirmed: standard input is not a terminal, so nobody can be asked; pass --yes to go ahead"
    : "not confirmed: nothing was changed";
}
