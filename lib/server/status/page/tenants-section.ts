/** The page's table of tenants across the fleet, each a link to its own page. */
import type { TenantSummary } from "../status-model.js";
import { counts, lastError, nothing, table, tenantHref } from "./cells.js";
import { type Html, html } from "./html.js";

function row(t: TenantSummary): Html {
  return html`<tr class="tenant" data-tenant="${t.tenant}">
<td class="id"><a href="${tenantHref(t.tenant)}">${t.tenant}</a></td><td class="num">${t.agents}</td><td>${t.instances.length > 0 ? t.instances.join(", ") : nothing()}</td><td class="num">${t.openTunnels}</td><td>${counts(t.recent.dials)}</td><td>${counts(t.recent.failures)}</td><td>${lastError(t.lastError)}</td>
</tr>`;
}

export function tenantsSection(tenants: readonly TenantSummary[]): Html {
  const window = tenants[0]?.recent.windowMinutes ?? 15;
  return html`<section>
<h2>Tenants</h2>
${table(
  [
    "Tenant",
    "Agents",
    "Instances",
    "Open tunnels",
    `Dials (${window} min)`,
    `Failures by reason (${window} min)`,
    "Last error",
  ],
  tenants.map(row),
  "No tenant has agents, recent dials or credential use on the instances that answered.",
  "tenants",
)}
</section>`;
}
