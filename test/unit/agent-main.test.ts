import { afterEach, describe, expect, it, vi } from "vitest";
import { main } from "../../services/agent/main.js";

const quiet = ["--log-level=error", "--health-server-port=0", "--admin-server-port=0"];
// Nothing listens on port 1 of loopback: the agent keeps retrying, locally, until it stops.
const unreachable = ["--proxy-server-port=1", "--sync-interval=50ms", "--sync-interval-cap=100ms"];

afterEach(() => {
  vi.restoreAllMocks();
});

function captureStderr(): string[] {
  const out: string[] = [];
  vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
    out.push(String(chunk));
    return true;
  });
  return out;
}

describe("kgw agent main", () => {
  it("prints help and exits 0", async () => {
    const out: string[] = [];
    vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
      out.push(String(chunk));
      return true;
    });
    expect(await main(["--help"], {})).toBe(0);
    expect(out.join("")).toContain("Usage: kgw agent [flags]");
  });

  it("reports a configuration error in one line and exits 2", async () => {
    const err = captureStderr();
    expect(await main(["--agent-cert=x.pem"], {})).toBe(2);
    expect(err).toEqual(["kgw agent: --agent-cert and --agent-key must be given together\n"]);
  });

  it("exits 2 when a certificate file cannot be read", async () => {
    const err = captureStderr();
    expect(await main([...quiet, "--ca-cert=/nonexistent/ca.pem"], {})).toBe(2);
    expect(err.join("")).toMatch(/^kgw agent: --ca-cert: cannot read \/nonexistent\/ca.pem/);
  });

  it("drains on the first SIGTERM and exits 0", async () => {
    const before = process.listenerCount("SIGTERM");
    const exit = main([...quiet, ...unreachable], {});
    await vi.waitFor(() => expect(process.listenerCount("SIGTERM")).toBe(before + 1));
    process.emit("SIGTERM", "SIGTERM");
    expect(await exit).toBe(0);
    expect(process.listenerCount("SIGTERM")).toBe(before);
  });

  it("stops at once on a second signal and exits 1", async () => {
    const before = process.listenerCount("SIGINT");
    // A long drain that the second signal cuts short.
    const exit = main([...quiet, ...unreachable, "--drain-timeout=1h"], {});
    await vi.waitFor(() => expect(process.listenerCount("SIGINT")).toBe(before + 1));
    process.emit("SIGINT", "SIGINT");
    process.emit("SIGINT", "SIGINT");
    expect(await exit).toBe(1);
    expect(process.listenerCount("SIGINT")).toBe(before);
  });
});
