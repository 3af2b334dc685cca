/**
 * One reading of a dial target for every frontend (HTTP CONNECT, a gRPC DIAL_REQ, a dial a peer
 * instance forwarded) and for the egress judge: which host a `host:port` names, in the one
 * spelling the tenant's policy is judged on.
 *
 * Why one parser: a resolver takes more spellings as an address than the dotted quad. glibc's
 * getaddrinfo (through inet_aton) reads `127.1`, `2130706433`, `0x7f000001`, `0177.0.0.1` and
 * `127.0.0.1.` as 127.0.0.1, and upstream's proxy-agent resolves a DIAL_REQ's host through it.
 * Judged as a name, such a text would slip past the loopback and link-local rules. So:
 *
 * - IPv4: every spelling inet_aton takes (1 to 4 parts, each decimal, octal with a leading 0,
 *   or hex with 0x, and a trailing dot) is recognised, and only the dotted quad is accepted.
 *   Any other spelling is refused, naming the address it spells: no Konnectivity client sends
 *   one, and forwarding it rewritten would change what the caller asked for. A name whose last
 *   label is a number (`example.127`) is refused too: URL parsers and some resolvers take it for
 *   an address, and it is no host name.
 * - IPv6: any RFC 4291 text form. An IPv4-mapped address (::ffff:a.b.c.d) is judged as its IPv4
 *   address, which is what the kernel connects to. The deprecated IPv4-compatible form
 *   (::a.b.c.d) is refused, since stacks differ on what it reaches, and so is a zone id
 *   (`%eth0` names an interface of whichever host parses it, not of the agent).
 * - A name: RFC 1123 labels of at most 63 characters, at most 253 in all, with one trailing dot
 *   allowed (a fully qualified name). It is judged lower-cased and without the dot: `localhost.`
 *   is localhost. It is forwarded as sent: the dot tells the agent's resolver not to apply its
 *   search domains, which only narrows what the name can mean.
 *
 * Socket-free and import-free, so that the transport's CONNECT parser can use it.
 */

/** A host as the policy sees it. */
export type TargetHost =
  /** A dotted quad, also for an IPv4-mapped IPv6 address. */
  | { readonly kind: "ipv4"; readonly address: string }
  /** Canonical text (RFC 5952 via WHATWG: lower case, zeros compressed). */
  | { readonly kind: "ipv6"; readonly address: string }
  /** Lower-cased, without a trailing dot. */
  | { readonly kind: "name"; readonly name: string };

export type TargetResult<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly reason: string };

export interface ParsedTarget {
  readonly host: TargetHost;
  readonly port: number;
}

const MAX_NAME_CHARS = 253;
const LABEL = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;
// WHATWG URL's "ends in a number": the label that makes a host an IPv4 address to a URL parser.
const NUMERIC_LABEL = /^(?:[0-9]+|0x[0-9a-f]*)$/i;
const HEX_PART = /^0x[0-9a-f]+$/i;
const OCTAL_PART = /^0[0-7]*$/;
const DECIMAL_PART = /^[1-9][0-9]*$/;
const DOTTED_QUAD = /^(?:0|[1-9][0-9]{0,2})(?:\.(?:0|[1-9][0-9]{0,2})){3}$/;
const MAPPED = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/;
// ::/96 serialised: "::", "::x" or "::x:y"; all but :: and ::1 are IPv4-compatible addresses.
const COMPATIBLE = /^::(?:[0-9a-f]{1,4}:)?[0-9a-f]{1,4}$/;

const ok = <T>(value: T): TargetResult<T> => ({ ok: true, value });
const no = <T>(reason: string): TargetResult<T> => ({ ok: false, reason });

/**
 * A `host:port` or `[ipv6]:port` as Go's net.JoinHostPort writes it, the form of a DIAL_REQ's
 * address and of a CONNECT request target.
 */
export function parseTargetAddress(address: string): TargetResult<ParsedTarget> {
  let hostText: string;
  let portText: string;
  let bracketed = false;
  if (address.startsWith("[")) {
    const close = address.indexOf("]");
    if (close < 0 || address[close + 1] !== ":") return no("expected [ipv6]:port");
    hostText = address.slice(1, close);
    portText = address.slice(close + 2);
    bracketed = true;
  } else {
    const colon = address.indexOf(":");
    if (colon < 0) return no("expected host:port");
    if (address.indexOf(":", colon + 1) >= 0) return no("an IPv6 address takes brackets: [ipv6]:port");
    hostText = address.slice(0, colon);
    portText = address.slice(colon + 1);
  }
  const port = /^[0-9]{1,5}$/.test(portText) ? Number(portText) : 0;
  if (port < 1 || port > 65_535) return no("port must be a decimal number in 1..65535");
  const host = parseTargetHost(hostText, bracketed);
  return host.ok ? ok({ host: host.value, port }) : host;
}

/**
 * A host alone. `bracketed`: it came in brackets, so it must be an IPv6 address; unbracketed,
 * a host with a colon is taken as IPv6 too (the judge is given hosts without their brackets).
 */
export function parseTargetHost(host: string, bracketed = false): TargetResult<TargetHost> {
  if (host === "") return no("empty host");
  if (bracketed || host.includes(":")) return parseIPv6(host);
  const bare = host.endsWith(".") ? host.slice(0, -1) : host;
  const labels = bare.split(".");
  if (NUMERIC_LABEL.test(labels.at(-1) ?? "")) return parseIPv4(host, labels);
  if (bare.length > MAX_NAME_CHARS) return no(`host name longer than ${MAX_NAME_CHARS} characters`);
  if (!labels.every((l) => LABEL.test(l))) return no("invalid host name");
  return ok({ kind: "name", name: bare.toLowerCase() });
}

/** `text` as inet_aton reads it; only its dotted-quad spelling is accepted. */
function parseIPv4(text: string, parts: readonly string[]): TargetResult<TargetHost> {
  const value = inetAton(parts);
  if (value === null) return no("invalid IPv4 address");
  const quad = [24, 16, 8, 0].map((shift) => Number((value >> BigInt(shift)) & 0xffn)).join(".");
  if (text !== quad || !DOTTED_QUAD.test(text)) {
    return no(`${text.length > 40 ? "the host" : text} spells the IPv4 address ${quad}; write it as ${quad}`);
  }
  return ok({ kind: "ipv4", address: quad });
}

/** inet_aton(3): a.b.c.d, a.b.c (c is 16 bits), a.b (b is 24 bits), a (32 bits). */
function inetAton(parts: readonly string[]): bigint | null {
  if (parts.length < 1 || parts.length > 4) return null;
  const values: bigint[] = [];
  for (const p of parts) {
    // Bounded before BigInt: the longest spelling of 2^32-1 is octal with its leading 0.
    if (p.length > 34) return null;
    if (HEX_PART.test(p)) values.push(BigInt(p.toLowerCase()));
    else if (OCTAL_PART.test(p)) values.push(BigInt(`0o${p}`));
    else if (DECIMAL_PART.test(p)) values.push(BigInt(p));
    else return null;
  }
  const last = values.pop()!;
  if (values.some((v) => v > 255n)) return null;
  const lastBits = BigInt(8 * (4 - values.length));
  if (last >= 1n << lastBits) return null;
  return values.reduce((acc, v, i) => acc | (v << BigInt(24 - 8 * i)), 0n) | last;
}

function parseIPv6(host: string): TargetResult<TargetHost> {
  if (host.includes("%")) return no("an IPv6 zone id names an interface of the host that parses it");
  let canonical: string;
  try {
    // WHATWG's IPv6 parser is RFC 4291's text form (with an embedded dotted quad), and its
    // serialiser is the canonical text.
    canonical = /^[0-9a-fA-F:.]+$/.test(host) ? new URL(`http://[${host}]/`).hostname.slice(1, -1) : "";
  } catch {
    canonical = "";
  }
  if (canonical === "") return no("invalid IPv6 address");
  const mapped = MAPPED.exec(canonical);
  if (mapped) {
    const hi = Number.parseInt(mapped[1]!, 16);
    const lo = Number.parseInt(mapped[2]!, 16);
    return ok({ kind: "ipv4", address: `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}` });
  }
  if (canonical !== "::1" && COMPATIBLE.test(canonical)) {
    return no("the deprecated IPv4-compatible IPv6 form (::a.b.c.d) is ambiguous; use the IPv4 address");
  }
  return ok({ kind: "ipv6", address: canonical });
}

/** The host as the policy's rules are written: an address, or a name. */
export function hostText(host: TargetHost): string {
  return host.kind === "name" ? host.name : host.address;
}
