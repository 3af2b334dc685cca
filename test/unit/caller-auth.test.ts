import type { PeerCertificate } from "node:tls";
import { describe, expect, it } from "vitest";
import { singleTenantCallerAuthenticator } from "../../lib/server/policy/caller-auth.js";

const cert = { subject: { CN: "kube-apiserver" }, serialNumber: "0A1B" } as unknown as PeerCertificate;

describe("the single-tenant caller authenticator", () => {
  it("names a certificate caller by CN and serial, in tenant default", () => {
    const auth = singleTenantCallerAuthenticator({ anonymousCallers: false });
    expect(auth({ listener: "tcp", verifiedCertificate: cert, authorization: [] })).toEqual({
      tenant: "default",
      principal: "cert:kube-apiserver#0A1B",
      listener: "tcp",
    });
  });

  it("trusts the Unix socket (its file permissions), as upstream does", () => {
    const auth = singleTenantCallerAuthenticator({ anonymousCallers: false });
    expect(auth({ listener: "uds", verifiedCertificate: undefined, authorization: [] }).principal).toBe(
      "uds",
    );
  });

  it("refuses a TCP caller without a verified certificate unless anonymous callers are allowed", () => {
    const strict = singleTenantCallerAuthenticator({ anonymousCallers: false });
    expect(() => strict({ listener: "tcp", verifiedCertificate: undefined, authorization: [] })).toThrow(
      expect.objectContaining({ code: "ERR_UNAUTHENTICATED" }),
    );
    const open = singleTenantCallerAuthenticator({ anonymousCallers: true });
    expect(open({ listener: "tcp", verifiedCertificate: undefined, authorization: [] }).principal).toBe(
      "anonymous",
    );
  });
});
