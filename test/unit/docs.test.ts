import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { STATUS_FLAGS } from "../../lib/commands/status/parse-status-command.js";
import { TENANT_FLAGS } from "../../lib/commands/tenant/parse-tenant-command.js";
import { AGENT_FLAGS } from "../../lib/config/agent-options.js";
import { SERVER_FLAGS } from "../../lib/config/server-flags.js";

// The configuration reference must list every flag the code accepts, so docs cannot drift.
const reference = readFileSync(new URL("../../docs/CONFIGURATION.md", import.meta.url), "utf8");

describe("docs/CONFIGURATION.md", () => {
  it.each([
    ...Object.keys(SERVER_FLAGS),
    ...Object.keys(AGENT_FLAGS),
    ...Object.keys(TENANT_FLAGS),
    ...Object.keys(STATUS_FLAGS),
  ])("documents --%s", (flag) => {
    expect(reference).toContain(`\`--${flag}\``);
  });
});
