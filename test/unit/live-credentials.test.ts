import { describe, expect, it } from "vitest";
import { CredentialRevokedError, type GatewayError } from "../../lib/errors.js";
import { LiveCredentials } from "../../lib/server/policy/live-credentials.js";

const ref = (key: string) => ({ key });

describe("LiveCredentials", () => {
  it("closes everything one credential opened, and nothing of another", () => {
    const live = new LiveCredentials<{ key: string }>();
    const closed: string[] = [];
    live.hold(ref("acme/agent/token/1"), () => closed.push("agent stream"));
    live.hold(ref("acme/caller/certificate/9"), () => closed.push("call"));
    live.hold(ref("acme/caller/certificate/9"), () => closed.push("tunnel"));
    expect(live.credentials).toBe(2);
    expect(live.holders).toBe(3);

    const errors: GatewayError[] = [];
    live.hold(ref("acme/caller/certificate/9"), (err) => errors.push(err));
    expect(live.revoke("acme/caller/certificate/9", new CredentialRevokedError())).toBe(3);
    expect(closed).toEqual(["call", "tunnel"]);
    expect(errors[0]).toBeInstanceOf(CredentialRevokedError);
    expect(live.refs().map((r) => r.key)).toEqual(["acme/agent/token/1"]);
    // Revoked once: a second revocation finds nothing to close.
    expect(live.revoke("acme/caller/certificate/9", new CredentialRevokedError())).toBe(0);
  });

  it("forgets a credential when the last thing it held is released, and a release counts once", () => {
    const live = new LiveCredentials<{ key: string }>();
    const close = () => {};
    const a = live.hold(ref("k"), close);
    const b = live.hold(ref("k"), close); // the same function twice is two holds
    a();
    a();
    expect(live.holders).toBe(1);
    b();
    expect(live.credentials).toBe(0);
    expect(live.refs()).toEqual([]);
  });

  it("does not let a release from before a revocation remove a later hold", () => {
    const live = new LiveCredentials<{ key: string }>();
    const early = live.hold(ref("k"), () => {});
    live.revoke("k", new CredentialRevokedError());
    live.hold(ref("k"), () => {});
    early();
    expect(live.holders).toBe(1);
  });
});
