/**
 * What a server loads on its way to listening (docs/PERFORMANCE.md, `startup`): the certificate
 * code (lib/pki/x509.ts, @peculiar/x509 and reflect-metadata, about a hundred milliseconds to
 * load) is for minting certificates, which no server start does, drop-in or hosted; tenant mode's
 * store, policy and install route are for tenant mode only. What runs is the bundle (dist/bundle/,
 * scripts/bundle.mjs): the files of it that `kgw server` imports before it listens are loaded in
 * a fresh process, each resolved file recorded by a resolve hook (Node's module.register), as the
 * CLI test does for `kgw --version`, and the bundle's metafile says which sources those hold.
 */
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chunkOf, sourcesOf } from "../helpers/bundle-sources.js";
import { requireBuild, runProcess } from "../helpers/kgw-bin.js";

/** The server's entry and what it imports on demand before listening, by mode. */
const START_PATHS = {
  "drop-in": ["services/server/main.ts", "lib/fleet/peer/peer-listener.ts"],
  hosted: [
    "services/server/main.ts",
    "lib/fleet/start-fleet.ts",
    "lib/tenancy/dynamo-store/dynamo-tenant-store.ts",
    "lib/server/policy/open-tenant-policy.ts",
  ],
};

const HOOKS = `import { appendFileSync } from "node:fs";
export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  appendFileSync(process.env.KGW_MODULE_TRACE, r.url + "\\n");
  return r;
}`;
const REGISTER = `import { register } from "node:module"; register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(HOOKS)}`)});`;

let dir: string;
beforeAll(async () => {
  requireBuild();
  dir = await mkdtemp(path.join(tmpdir(), "kgw-startup-modules-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Every source whose bundle file a fresh process loads while importing `modules`' chunks. */
async function modulesLoaded(name: string, modules: string[]): Promise<string[]> {
  const trace = path.join(dir, `${name}.txt`);
  const urls = modules.map(chunkOf);
  const script = `for (const u of ${JSON.stringify(urls)}) await import(u);`;
  const r = await runProcess(
    process.execPath,
    ["--import", `data:text/javascript,${encodeURIComponent(REGISTER)}`, "--input-type=module", "-e", script],
    { env: { KGW_MODULE_TRACE: trace } },
  );
  expect(r).toMatchObject({ code: 0, err: "" });
  const loaded = readFileSync(trace, "utf8").split("\n");
  // The chunks asked for were loaded: the trace works.
  expect(loaded).toEqual(expect.arrayContaining(urls));
  const sources = sourcesOf(loaded);
  expect(sources).toEqual(expect.arrayContaining(modules));
  return sources;
}

describe("a server's start-up", () => {
  it.each(Object.entries(START_PATHS))("%s loads no certificate code", async (mode, modules) => {
    const loaded = await modulesLoaded(mode, modules);
    expect(loaded.filter((u) => /@peculiar\/x509|reflect-metadata|^lib\/pki\/x509\.ts$/.test(u))).toEqual([]);
  });

  it("the drop-in loads no tenant store, tenant policy or install route", async () => {
    const loaded = await modulesLoaded("drop-in-tenancy", START_PATHS["drop-in"]);
    const tenantMode =
      /^lib\/(tenancy\/(file-store|dynamo-store)\/|server\/(install\/|policy\/(open-tenant-policy|tenant-policy)\.ts))/;
    expect(loaded.filter((u) => tenantMode.test(u))).toEqual([]);
  });

  it("the drop-in loads neither the fleet nor the AWS SDK", async () => {
    const loaded = await modulesLoaded("drop-in-fleet", START_PATHS["drop-in"]);
    expect(
      loaded.filter((u) => /@aws-sdk\/|@smithy\/|^lib\/(fleet\/start-fleet|registry\/dynamo\/)/.test(u)),
    ).toEqual([]);
  });
});
