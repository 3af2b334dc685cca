/**
 * What is open on each credential right now: agent streams, frontend calls, CONNECT tunnels.
 * Authentication happens once, when a stream or tunnel opens; this is how a credential revoked
 * afterwards still takes effect on what it opened. The policy that issued the credentials
 * re-checks each distinct credential (not each connection) and revokes the ones that are no
 * longer good, which closes everything they hold.
 */
import type { GatewayError } from "../../errors.js";
import type { CredentialRef } from "../core/dial-context.js";

type Closer = (err: GatewayError) => void;

interface Held<R extends CredentialRef> {
  ref: R;
  closers: Set<Closer>;
}

export class LiveCredentials<R extends CredentialRef> {
  private readonly byKey = new Map<string, Held<R>>();

  /** Keeps `close` until the returned release is called (idempotent). */
  hold(ref: R, close: Closer): () => void {
    let held = this.byKey.get(ref.key);
    if (!held) {
      held = { ref, closers: new Set() };
      this.byKey.set(ref.key, held);
    }
    // One entry per hold, even for the same function: each release removes only its own.
    const entry: Closer = (err) => close(err);
    held.closers.add(entry);
    const h = held;
    return () => {
      if (!h.closers.delete(entry)) return;
      if (h.closers.size === 0 && this.byKey.get(h.ref.key) === h) this.byKey.delete(h.ref.key);
    };
  }

  /** Each credential that has something open, once. */
  refs(): R[] {
    return [...this.byKey.values()].map((h) => h.ref);
  }

  /** Closes everything opened with the credential `key`; returns how many were closed. */
  revoke(key: string, err: GatewayError): number {
    const held = this.byKey.get(key);
    if (!held) return 0;
    this.byKey.delete(key);
    const closers = [...held.closers];
    held.closers.clear();
    for (const close of closers) close(err);
    return closers.length;
  }

  /** Distinct credentials with something open. */
  get credentials(): number {
    return this.byKey.size;
  }

  /** Streams and tunnels held, over all credentials. */
  get holders(): number {
    let n = 0;
    for (const h of this.byKey.values()) n += h.closers.size;
    return n;
  }
}
