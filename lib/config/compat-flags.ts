import type { FlagSpec } from "./flags.js";

/**
 * klog's `--logtostderr`, which the Kubernetes documentation's manifests pass to both upstream
 * binaries. Accepted so those manifests work unchanged; we always log JSON lines to stdout.
 */
export const LOGTOSTDERR_FLAG = {
  kind: "bool",
  default: true,
  help: "Accepted for upstream compatibility; logs always go to stdout as JSON lines.",
} as const satisfies FlagSpec;
