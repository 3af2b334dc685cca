/** Small pieces of the page's tables, shared by its sections. Every value goes through `html`. */
import type { LastError } from "../status-model.js";
import { type Html, type HtmlValue, html } from "./html.js";

/** An empty cell that says so: grey, so that "no answer" and "zero" read differently. */
export const nothing = (text = "–"): Html => html`<span class="none">${text}</span>`;

export function orNothing(value: HtmlValue): HtmlValue {
  return value === null || value === undefined || value === "" ? nothing() : value;
}

/** An ISO time as the API has it (UTC, sortable, what `kgw status` prints too). */
export function when(iso: string | null): HtmlValue {
  return iso === null ? nothing() : html`<time datetime="${iso}">${iso}</time>`;
}

/** "ok 10, denied 2", or a grey "none". */
export function counts(map: Readonly<Record<string, number | undefined>>): HtmlValue {
  const parts = Object.entries(map)
    .filter(([, n]) => (n ?? 0) > 0)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([k, n]) => `${k} ${n}`);
  return parts.length > 0 ? parts.join(", ") : nothing("none");
}

export function lastError(e: LastError | null): HtmlValue {
  if (!e) return nothing("none");
  return html`<code>${e.code ?? e.outcome}</code> at ${when(e.at)} (dial <code>${e.dialId}</code> on ${e.instance})`;
}

/** A table, or a line saying why there is none. */
export function table(head: readonly string[], rows: readonly Html[], empty: string, id: string): Html {
  if (rows.length === 0) return html`<p class="none" id="${id}">${empty}</p>`;
  return html`<table id="${id}">
<thead><tr>${head.map((h) => html`<th>${h}</th>`)}</tr></thead>
<tbody>
${rows}
</tbody>
</table>`;
}

export const tenantHref = (tenant: string): string => `/ui/tenants/${encodeURIComponent(tenant)}`;
