/**
 * The admin port's status page without sockets: the one escaping function and the `html`
 * template every section is built with, then whole pages rendered from a fleet whose
 * outside-controlled fields (an agent's id and claimed version, a peer's error text, addresses)
 * are hostile: each must come out as text, the dead instance marked, the headers strict, the
 * stylesheet the one the policy's hash names, and a path naming no tenant refused as the JSON
 * route refuses it.
 */
import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { InstanceAnswer } from "../../lib/server/status/fleet-status.js";
import { escapeHtml, type Html, html } from "../../lib/server/status/page/html.js";
import { statusPageRoutes } from "../../lib/server/status/page/page-routes.js";
import type { InstanceSlice } from "../../lib/server/status/status-model.js";
import { BAD_TENANT_PATH, statusReader } from "../../lib/server/status/status-reader.js";
import { statusRoutes } from "../../lib/server/status/status-routes.js";
import type { HttpReply, Routes } from "../../lib/transport/http-endpoints.js";

const T0 = Date.parse("2026-12-05T12:00:00Z");
const SCRIPT = `<script>alert("x")</script>`;
const IMG = `"><img src=x onerror='alert(1)'>&amp;`;

describe("escapeHtml and the html template", () => {
  it("turns every character that can open markup or end an attribute into an entity", () => {
    expect(escapeHtml(`<a href="x" title='y'>&\`</a>`)).toBe(
      "&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&#96;&lt;/a&gt;",
    );
    // An entity in the input is text too: shown as typed, not decoded.
    expect(escapeHtml("&amp;")).toBe("&amp;amp;");
    expect(escapeHtml("tab\there\u0000nul\u001b[31m")).toBe("tab\there\ufffdnul\ufffd[31m");
  });

  it("escapes interpolated text, keeps its own markup, and never escapes twice", () => {
    const inner = html`<b>${SCRIPT}</b>`;
    expect(inner.text).toBe("<b>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;</b>");
    expect(html`<p title="${IMG}">${inner}</p>`.text).toBe(
      `<p title="&quot;&gt;&lt;img src=x onerror=&#39;alert(1)&#39;&gt;&amp;amp;"><b>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;</b></p>`,
    );
    expect(html`${["<i>", html`<i>`, 3, null, undefined, false]}`.text).toBe("&lt;i&gt;<i>3");
  });

  it("takes nothing for markup that it did not make, whatever its shape", () => {
    const forged = { text: SCRIPT, toString: () => SCRIPT } as unknown as Html;
    expect(html`${forged}`.text).not.toContain("<script");
    expect(html`${forged}`.text).toContain("&lt;script&gt;");
  });
});

const slice: InstanceSlice = {
  apiVersion: "kgw.status/v1",
  instance: "fleet-1",
  version: "0.1.0",
  startedAt: new Date(T0).toISOString(),
  uptimeSeconds: 3725,
  draining: false,
  agents: 1,
  tunnels: 1,
  tenants: [
    {
      tenant: "acme",
      agents: [
        {
          agentId: SCRIPT,
          instance: "fleet-1",
          remoteAddress: IMG,
          transport: "tunnel",
          agentVersion: `1.0</td><td>${SCRIPT}`,
          connectedSince: new Date(T0).toISOString(),
          lastSeen: new Date(T0).toISOString(),
          responsive: true,
          load: 1,
        },
      ],
      openTunnels: 1,
      recent: { windowMinutes: 15, dials: { ok: 3, denied: 2 }, failures: { ERR_FORBIDDEN: 2 } },
      lastError: {
        at: new Date(T0).toISOString(),
        code: "ERR_FORBIDDEN",
        outcome: "denied",
        dialId: IMG,
        instance: "fleet-1",
      },
      credentials: [{ id: "token:0123456789abcdef", role: "caller", lastUsed: new Date(T0).toISOString() }],
    },
  ],
};

const answers: InstanceAnswer[] = [
  { id: "fleet-1", peerAddress: "127.0.0.1:8135", lease: "live", leaseExpiresAt: T0, slice, reason: null },
  {
    id: "fleet-2",
    peerAddress: "127.0.0.1:8136",
    lease: "live",
    leaseExpiresAt: T0,
    slice: null,
    reason: `unreachable: ${SCRIPT}`,
  },
];

function routes(): Routes {
  const read = statusReader({
    instance: "fleet-1",
    local: () => slice,
    fleet: async () => answers,
    now: () => T0,
  });
  return { ...statusRoutes(read), ...statusPageRoutes(read) };
}

async function get(path: string): Promise<HttpReply> {
  const r = routes();
  const exact = r[path];
  if (exact) return exact({ path, query: new URLSearchParams() });
  const prefix = Object.keys(r).find((k) => k.endsWith("/") && k !== "/" && path.startsWith(k))!;
  return r[prefix]!({ path, query: new URLSearchParams() });
}

/** A tag from outside input, which a browser would parse (an escaped one starts with &lt;). */
const INJECTED = /<script|<img/i;

describe("the status page", () => {
  it("shows the fleet: every instance, the silent one marked with its reason, every tenant linked", async () => {
    const r = await get("/ui");
    expect(r.status).toBe(200);
    expect(r.contentType).toBe("text/html; charset=utf-8");
    expect(r.body).toMatch(/<tr class="instance up" data-instance="fleet-1">/);
    expect(r.body).toMatch(/<tr class="instance down" data-instance="fleet-2">/);
    expect(r.body).toContain(
      "did not answer: unreachable: &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;",
    );
    expect(r.body).toContain('id="partial">Partial answer: fleet-2 did not answer');
    expect(r.body).toContain('<a href="/ui/tenants/acme">acme</a>');
    expect(r.body).toContain("ERR_FORBIDDEN 2");
    expect(r.body).toContain('<meta http-equiv="refresh" content="10">');
    expect(r.body).not.toMatch(INJECTED);
  });

  it("shows a tenant: its agents with every field as text, dials, last error, credentials", async () => {
    const r = await get("/ui/tenants/acme");
    expect(r.status).toBe(200);
    expect(r.body).toContain(
      `data-agent="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" data-instance="fleet-1"`,
    );
    expect(r.body).toContain("<td>1.0&lt;/td&gt;&lt;td&gt;&lt;script&gt;");
    expect(r.body).toContain("&quot;&gt;&lt;img src=x onerror=&#39;alert(1)&#39;&gt;&amp;amp;");
    expect(r.body).toContain('data-credential="token:0123456789abcdef"');
    expect(r.body).toContain('<dd id="open-tunnels">1</dd>');
    expect(r.body).not.toMatch(INJECTED);
  });

  it("sends a policy that allows no script and only its own stylesheet, by hash", async () => {
    const r = await get("/ui");
    const csp = r.headers?.["content-security-policy"] ?? "";
    expect(csp).toMatch(/^default-src 'none'; style-src 'sha256-[A-Za-z0-9+/]+=*'/);
    expect(csp).not.toMatch(/script-src|unsafe-inline|unsafe-eval/);
    expect(r.headers?.["x-frame-options"]).toBe("DENY");
    const style = /<style>([\s\S]*?)<\/style>/.exec(r.body)![1]!;
    const hash = createHash("sha256").update(style).digest("base64");
    expect(csp).toContain(`'sha256-${hash}'`);
    expect(r.body.match(/<style>/g)).toHaveLength(1);
  });

  it("refuses a path that names no tenant as the JSON route does, without echoing it", async () => {
    for (const bad of ["/ui/tenants/%3Cscript%3E", "/ui/tenants/ACME", "/ui/tenants/a/b"]) {
      const page = await get(bad);
      const api = await get(bad.replace("/ui/", "/status/"));
      expect([page.status, api.status]).toEqual([400, 400]);
      expect(JSON.parse(api.body)).toEqual({ error: { code: "ERR_BAD_REQUEST", message: BAD_TENANT_PATH } });
      expect(page.body).toContain(`<code>ERR_BAD_REQUEST</code>: ${BAD_TENANT_PATH}`);
      expect(page.body).not.toContain("script");
      expect(page.headers?.["content-security-policy"]).toMatch(/^default-src 'none'/);
    }
  });

  it("sends a browser at the admin port's root to the page", async () => {
    const r = await get("/");
    expect(r.status).toBe(303);
    expect(r.headers).toEqual({ location: "/ui" });
  });
});
