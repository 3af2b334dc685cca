/** A tenant's credentials by last use: what to check before revoking one. */
import type { CredentialUse } from "../status-model.js";
import { table, when } from "./cells.js";
import { type Html, html } from "./html.js";

function row(c: CredentialUse): Html {
  return html`<tr class="credential" data-credential="${c.id}"><td class="id">${c.id}</td><td>${c.role}</td><td>${when(c.lastUsed)}</td></tr>`;
}

export function credentialsSection(credentials: readonly CredentialUse[]): Html {
  return html`<section>
<h2>Credentials</h2>
${table(
  ["Credential", "Role", "Last used"],
  credentials.map(row),
  "No credential of this tenant authenticated on the instances that answered since they started.",
  "credentials",
)}
</section>`;
}
