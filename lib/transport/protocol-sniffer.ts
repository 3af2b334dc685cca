/**
 * Tells gRPC (HTTP/2 with prior knowledge) from HTTP/1.1 CONNECT by the first bytes of a
 * connection, for listeners where ALPN cannot decide (Unix socket, plaintext, TLS without ALPN).
 */
const H2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

export type Sniffed = "h2" | "http1" | "need-more";

export function sniffProtocol(head: Buffer): Sniffed {
  const n = Math.min(head.length, H2_PREFACE.length);
  if (head.compare(H2_PREFACE, 0, n, 0, n) !== 0) return "http1";
  return n === H2_PREFACE.length ? "h2" : "need-more";
}

export const H2_PREFACE_LENGTH = H2_PREFACE.length;
