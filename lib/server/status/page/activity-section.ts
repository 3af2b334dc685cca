/** What a tenant's dials did: tunnels open now, dials and failures by reason, the last error. */
import type { TenantDetail } from "../status-model.js";
import { counts, lastError } from "./cells.js";
import { type Html, html } from "./html.js";

export function activitySection(t: TenantDetail): Html {
  const minutes = t.recent.windowMinutes;
  return html`<section>
<h2>Dials</h2>
<dl id="activity">
<dt>Open tunnels</dt><dd id="open-tunnels">${t.openTunnels}</dd>
<dt>Dials, last ${minutes} min</dt><dd id="dials">${counts(t.recent.dials)}</dd>
<dt>Failures and refusals by reason, last ${minutes} min</dt><dd id="failures">${counts(t.recent.failures)}</dd>
<dt>Last error</dt><dd id="last-error">${lastError(t.lastError)}</dd>
</dl>
</section>`;
}
