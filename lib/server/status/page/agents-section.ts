/** A tenant's agent streams, each on the instance that holds it, as the API lists them. */
import type { AgentStatus } from "../status-model.js";
import { orNothing, table, when } from "./cells.js";
import { type Html, html } from "./html.js";

function row(a: AgentStatus): Html {
  return html`<tr class="agent ${a.responsive ? "up" : "down"}" data-agent="${a.agentId}" data-instance="${a.instance}">
<td class="id">${a.agentId}</td><td>${a.instance}</td><td>${orNothing(a.remoteAddress)}</td><td>${orNothing(a.transport)}</td><td>${a.agentVersion ?? "unknown"}</td><td>${when(a.connectedSince)}</td><td>${when(a.lastSeen)}</td><td class="state">${a.responsive ? "yes" : "no"}</td><td class="num">${a.load}</td>
</tr>`;
}

export function agentsSection(agents: readonly AgentStatus[]): Html {
  return html`<section>
<h2>Agents</h2>
${table(
  [
    "Agent",
    "Instance",
    "Remote address",
    "Transport",
    "Version",
    "Connected since",
    "Last seen",
    "Responsive",
    "Load",
  ],
  agents.map(row),
  "No agent connected to the instances that answered.",
  "agents",
)}
</section>`;
}
