/** The page's table of the fleet's instances: a dead or silent one is listed and marked, never left out. */
import { durationText } from "../../../util/duration-text.js";
import type { InstanceStatus } from "../status-model.js";
import { nothing, orNothing, table } from "./cells.js";
import { type Html, html } from "./html.js";

const yesNo = (v: boolean | null) => (v === null ? nothing() : v ? "yes" : "no");

/** "up", "draining" or "down": the row's class, which colours it. */
function health(i: InstanceStatus): "up" | "draining" | "down" {
  if (!i.answered) return "down";
  return i.draining || i.lease === "draining" ? "draining" : "up";
}

function row(i: InstanceStatus): Html {
  const state = health(i);
  const said = i.answered
    ? state === "draining"
      ? "draining"
      : "answered"
    : `did not answer: ${i.reason ?? "no answer"}`;
  return html`<tr class="instance ${state}" data-instance="${i.id}">
<td class="id">${i.id}</td><td>${i.lease}</td><td class="state">${said}</td><td>${yesNo(i.draining)}</td><td class="num">${orNothing(i.agents)}</td><td class="num">${orNothing(i.tunnels)}</td><td>${orNothing(i.version)}</td><td>${i.uptimeSeconds === null ? nothing() : durationText(i.uptimeSeconds)}</td><td>${orNothing(i.peerAddress)}</td>
</tr>`;
}

export function instancesSection(instances: readonly InstanceStatus[]): Html {
  return html`<section>
<h2>Instances</h2>
${table(
  ["Instance", "Lease", "Status", "Draining", "Agents", "Tunnels", "Version", "Uptime", "Peer address"],
  instances.map(row),
  "No instance answered.",
  "instances",
)}
</section>`;
}
