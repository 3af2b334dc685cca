/**
 * A second process writing to a file tenant store, for the race test: opens the store in argv[2],
 * says "ready", waits for a line on stdin, then adds argv[4] caller tokens to tenant argv[3], one
 * read-modify-write each, and prints the ids it added and the conflicts it met as JSON.
 */
import { once } from "node:events";
import { openFileTenantStore } from "../../lib/tenancy/file-store/file-tenant-store.js";
import { updateTenant } from "../../lib/tenancy/mutate.js";
import { addToken, requireActive } from "../../lib/tenancy/operations.js";
import type { TenantStore } from "../../lib/tenancy/store.js";
import { generateToken } from "../../lib/tenancy/tokens.js";

const [dir, tenantId, countText] = process.argv.slice(2) as [string, string, string];
const opened = await openFileTenantStore(dir);
// Counts lost conditional writes, so the test can tell the two processes really interleaved.
let conflicts = 0;
const store: TenantStore = {
  get: (id) => opened.get(id),
  list: () => opened.list(),
  watch: (o) => opened.watch(o),
  close: () => opened.close(),
  put: (next) =>
    opened.put(next).catch((err: unknown) => {
      if ((err as { code?: string }).code === "ERR_CONFLICT") conflicts++;
      throw err;
    }),
};
process.stdout.write("ready\n");
await once(process.stdin, "data");
const ids: string[] = [];
for (let i = 0; i < Number(countText); i++) {
  let id = "";
  await updateTenant(store, tenantId, (current) => {
    const token = generateToken("caller", tenantId);
    id = token.id;
    return addToken(requireActive(current, tenantId), "caller-token", token, new Date());
  });
  ids.push(id);
}
process.stdout.write(`${JSON.stringify({ ids, conflicts })}\n`);
process.stdin.destroy();
