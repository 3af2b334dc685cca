/**
 * Both implementations log at comparable verbosity: start-up, agents coming and going, warnings
 * and errors; nothing per packet and nothing per successful dial.
 *  - kgw at `info` (its default): start-up, agent connected/disconnected, failed or timed-out
 *    dials. Per-connection lines are `debug`.
 *  - upstream at klog `-v=0`. Upstream's proxy-server and proxy-agent set `-v=4` themselves when
 *    not told otherwise, and at 4 they log about two lines per DATA packet ("received DATA",
 *    "write to remote"); at 2–3 a few per dial ("Received request for host", "Received DIAL_REQ");
 *    at 1 one per CONNECT tunnel ("EOF from host"). At 0 what remains is start-up and ErrorS
 *    lines (klog has no level below that). Agent connects are `-v=2` upstream, so at these
 *    settings ours writes a little more, never less.
 * Each scenario's heading says how many lines every child wrote, so a run shows it held.
 */
export const KGW_LOG_LEVEL = "info";
export const UPSTREAM_KLOG_V = 0;

export const KGW_LOG_FLAGS = [`--log-level=${KGW_LOG_LEVEL}`];
export const UPSTREAM_LOG_FLAGS = [`--v=${UPSTREAM_KLOG_V}`];

export const VERBOSITY =
  `kgw ${KGW_LOG_FLAGS.join(" ")}, upstream ${UPSTREAM_LOG_FLAGS.join(" ")} ` +
  "(upstream's own default is -v=4: about two lines per packet)";
