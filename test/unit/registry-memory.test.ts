/** The embedded registry: the shared contract, plus what only it does (TTL as garbage collection). */
import { describe, expect, it } from "vitest";
import { OWNER_ROW_TTL_MS } from "../../lib/registry/durations.js";
import { MemoryRegistry } from "../helpers/memory-registry.js";
import { describeRegistryContract, lease, row, T0 } from "./registry.contract.js";

describeRegistryContract(
  "memory",
  async () => {
    // One storage, several "clients": the same object, as two handles on one table. Its clock
    // (TTL only) is the contract's.
    const shared = new MemoryRegistry({ clock: () => T0 });
    return { open: async () => shared, cleanup: async () => {} };
  },
  { corruptible: false },
);

describe("memory registry", () => {
  it("forgets rows and leases whose TTL has passed, like DynamoDB's garbage collection", async () => {
    let now = T0;
    const registry = new MemoryRegistry({ clock: () => now });
    await registry.claim(row("acme", "a", "i1"));
    await registry.heartbeat(lease("i1", { heartbeatAt: now }));
    now += OWNER_ROW_TTL_MS - 1;
    expect((await registry.ownersOf("acme")).items).toHaveLength(1);
    now += 1;
    expect((await registry.ownersOf("acme")).items).toEqual([]);
    expect((await registry.listInstances()).items).toEqual([]);
  });
});
