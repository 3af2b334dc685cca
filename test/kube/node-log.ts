/**
 * What a fake node (fake-node.ts) reported on stdout: every connection its kubelet and pod
 * accepted, with the process that owns the other end, and every one that closed. Read from the
 * node's captured output, so any number of fake nodes can be told apart.
 */
import type { Proc } from "../interop/harness.js";
import type { ConnRecord } from "./fake-node.js";

/**
 * A mark of every connection the node has accepted so far (its `accepted` lines, printed at
 * accept), for connRecordsSince: a record printed later for a connection accepted before the
 * mark is not counted as coming after it.
 */
export function connMark(node: Proc): number {
  return node.lines.filter((l) => l.startsWith('{"accepted"')).length;
}

/** The records of connections accepted after `mark` (connMark), in the order they were accepted. */
export function connRecordsSince(node: Proc, mark: number): ConnRecord[] {
  return connRecords(node)
    .filter((c) => c.seq > mark)
    .sort((a, b) => a.seq - b.seq);
}

export function connRecords(node: Proc): ConnRecord[] {
  return node.lines
    .filter((l) => l.startsWith('{"conn"'))
    .map((l) => (JSON.parse(l) as { conn: ConnRecord }).conn);
}

export function closedPeers(node: Proc): Set<string> {
  return new Set(
    node.lines
      .filter((l) => l.startsWith('{"closed"'))
      .map((l) => (JSON.parse(l) as { closed: { peer: string } }).closed.peer),
  );
}
