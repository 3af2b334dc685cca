/**
 * Sizes and durations of the tenant model, each with the reason for its value. The store
 * enforces them on every write and every read, so a hand-edited or hostile record cannot make a
 * server allocate or print more than these.
 */

/** A DNS label (RFC 1123), so a tenant id fits in a host name, a URI path and a file name. */
export const MAX_TENANT_ID_LENGTH = 63;

/** Display names are for humans in `kgw tenant list`; a line's worth is plenty. */
export const MAX_DISPLAY_NAME_LENGTH = 128;

/**
 * Credentials of one kind kept per tenant, active and inactive together. Rotation keeps one or
 * two active at a time; the rest is history that is pruned first. Bounds the record (and so the
 * DynamoDB item, 400 KB at most) far below any limit.
 */
export const MAX_CREDENTIALS_PER_KIND = 32;

/**
 * Inactive (expired or revoked) credentials stay listed this long so `kgw tenant show` can
 * explain why one was refused; an allowlist forgets them safely (unknown means refused).
 */
export const INACTIVE_CREDENTIAL_RETENTION_MS = 30 * 24 * 3_600_000;

/**
 * Largest serialized tenant record. 32 credentials of each of the four kinds, with the longest
 * tenant id and display name, come to about 40 KiB (tenant-record-codec.test.ts measures it); a
 * record beyond this is refused on write and reported corrupt on read, before it is parsed.
 */
export const MAX_RECORD_BYTES = 64 * 1024;

/** Default grace period of a rotated credential: a day covers a rollout across time zones. */
export const DEFAULT_ROTATION_GRACE_MS = 24 * 3_600_000;

/** Longest grace accepted: a "rotated" credential valid for longer is not really rotated. */
export const MAX_ROTATION_GRACE_MS = 90 * 24 * 3_600_000;

/** Caller and agent certificates are valid a year by default, as kubeadm's client certificates. */
export const DEFAULT_CERT_VALIDITY_MS = 365 * 24 * 3_600_000;

/**
 * How often a running server re-reads the store (the watch's poll interval). A change (a
 * revocation, a deletion) is seen within this plus one read; 2 s keeps that well inside the
 * "seconds" the product promises while a poll of the file store costs a readdir per tenant.
 */
export const DEFAULT_WATCH_INTERVAL_MS = 2_000;
