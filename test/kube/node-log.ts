/**
 * What a fake node (fake-node.ts) reported on stdout: every connection its kubelet and pod
 * accepted, with the process that owns the other end, and every one that closed. Read from the
 * node's captured output, so any number of fake nodes can be told apart.
 */
import type { Proc } from "../interop/harness.js";
import type { ConnRecord } from "./fake-node.js";

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
