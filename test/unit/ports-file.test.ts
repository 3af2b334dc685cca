/**
 * The --ports-file announcement: what a reader polling for it may rely on (whole JSON or no file,
 * an earlier run's file gone before this one binds), and a file that cannot be written is a
 * ConfigError naming the flag.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { parseAgentOptions } from "../../lib/config/agent-options.js";
import { parseServerOptions } from "../../lib/config/server-options.js";
import { clearPortsFile, writePortsFile } from "../../lib/observability/ports-file.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function tempDir(): string {
  const d = mkdtempSync(path.join(tmpdir(), "kgw-ports-file-"));
  dirs.push(d);
  return d;
}

describe("the ports file", () => {
  it("is one JSON object, replaced whole, with no temporary file left beside it", async () => {
    const dir = tempDir();
    const file = path.join(dir, "ports.json");
    await writePortsFile(file, { agent: 8132, admin: 8133, health: 8134 });
    expect(JSON.parse(readFileSync(file, "utf8"))).toEqual({ agent: 8132, admin: 8133, health: 8134 });
    await writePortsFile(file, { agent: 1, admin: 2, health: 3 });
    expect(JSON.parse(readFileSync(file, "utf8"))).toEqual({ agent: 1, admin: 2, health: 3 });
    expect(readdirSync(dir)).toEqual(["ports.json"]);
  });

  it("left by an earlier run is removed, and removing none is no error", async () => {
    const file = path.join(tempDir(), "ports.json");
    writeFileSync(file, '{"agent":1}\n');
    await clearPortsFile(file);
    expect(existsSync(file)).toBe(false);
    await clearPortsFile(file);
  });

  it("that cannot be written is a ConfigError naming --ports-file, and leaves nothing behind", async () => {
    const dir = tempDir();
    const file = path.join(dir, "missing", "ports.json");
    await expect(writePortsFile(file, { agent: 1 })).rejects.toMatchObject({
      code: "ERR_CONFIG",
      message: expect.stringContaining(`--ports-file ${file}: ENOENT`),
    });
    expect(readdirSync(dir)).toEqual([]);
  });

  it("is asked for with --ports-file by kgw server and kgw agent, and off by default", () => {
    const server = [
      "--uds-name=/run/kgw.sock",
      "--cluster-cert=c.pem",
      "--cluster-key=k.pem",
      "--agent-token=t0123456789abcdef",
    ];
    const parsedServer = (extra: string[]) => {
      const p = parseServerOptions([...server, ...extra], {});
      return p.help ? undefined : p.options.portsFile;
    };
    expect(parsedServer([])).toBeNull();
    expect(parsedServer(["--ports-file=/run/kgw/ports.json"])).toBe("/run/kgw/ports.json");
    const parsedAgent = (extra: string[]) => {
      const p = parseAgentOptions(["--ca-cert=ca.pem", ...extra], {});
      return p.help ? undefined : p.options.portsFile;
    };
    expect(parsedAgent([])).toBeNull();
    expect(parsedAgent(["--ports-file=/run/kgw/agent-ports.json"])).toBe("/run/kgw/agent-ports.json");
  });
});
