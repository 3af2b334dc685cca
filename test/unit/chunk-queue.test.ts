import { describe, expect, it } from "vitest";
import { ChunkQueue } from "../../lib/proto/chunk-queue.js";

describe("ChunkQueue", () => {
  it("peeks and takes across chunks, and views within one", () => {
    const q = new ChunkQueue();
    q.push(Buffer.from("ab"));
    q.push(Buffer.alloc(0));
    q.push(Buffer.from("cdef"));
    expect(q.length).toBe(6);
    expect(q.peek(3).toString()).toBe("abc");
    expect(q.length).toBe(6);
    expect(q.take(3).toString()).toBe("abc");
    const first = q.first!;
    const view = q.take(2);
    expect(view.buffer).toBe(first.buffer);
    expect(view.toString()).toBe("de");
    q.skip(1);
    expect(q.length).toBe(0);
    expect(q.take(0)).toHaveLength(0);
  });

  it("copies only the peeked bytes when a header is split from a large payload", () => {
    const q = new ChunkQueue();
    q.push(Buffer.from([1, 2]));
    q.push(Buffer.alloc(4 * 1024 * 1024, 3));
    const header = q.peek(5);
    expect([...header]).toEqual([1, 2, 3, 3, 3]);
    // Not a view of a copy of everything buffered.
    expect(header.buffer.byteLength).toBeLessThan(1024 * 1024);
  });
});
