/**
 * The scenario registry: `npm run bench` runs these in order (or the ones named by --only). A
 * new scenario (a peer hop between instances, many tenants, …) is a module exporting a Scenario,
 * added here; the harness (processes, PKI, paths, table) is shared.
 */
import type { Scenario } from "../harness/types.js";
import { calibration } from "./calibration.js";
import { dial } from "./dial.js";
import { dialSteps } from "./dial-steps.js";
import { fairness } from "./fairness.js";
import { headOfLine } from "./head-of-line.js";
import { memory } from "./memory.js";
import { peerHop } from "./peer-hop.js";
import { rehome } from "./rehome.js";
import { scale } from "./scale.js";
import { scaleBurst } from "./scale-burst.js";
import { startup } from "./startup.js";
import { throughput, wan } from "./throughput.js";

export const SCENARIOS: readonly Scenario[] = [
  calibration,
  throughput,
  wan,
  dial,
  dialSteps,
  headOfLine,
  fairness,
  peerHop,
  rehome,
  memory,
  scale,
  startup,
  scaleBurst,
];
