/**
 * Issuing a fleet peer certificate (the identity peer-identity.ts checks). Its own module because
 * it loads the certificate code (lib/pki/, @peculiar/x509), which a running server never needs:
 * kept off peer-identity.ts, which every hosted server loads at start-up, it saved about a
 * hundred milliseconds of start to listening (docs/PERFORMANCE.md, `startup`).
 */
import { type CaPems, type IssuedCertificate, type IssueOptions, issueCertificate } from "../../pki/issue.js";
import { PEER_IDENTITY_URI } from "./peer-identity.js";

/**
 * What to issue an instance's peer certificate with (lib/pki/issue.ts): the peer URI, usable as
 * server (its peer port) and client (its own peer links). Names are optional: peers check the
 * URI, not a host name.
 */
export function peerCertificateOptions(commonName = "kgw-fleet-peer"): IssueOptions {
  return { commonName, uris: [PEER_IDENTITY_URI], usage: "both" };
}

/** Issues a fleet peer certificate (and its key) from `ca`, the fleet's peer CA. */
export function issuePeerCertificate(ca: CaPems, commonName?: string): Promise<IssuedCertificate> {
  return issueCertificate(ca, peerCertificateOptions(commonName));
}
