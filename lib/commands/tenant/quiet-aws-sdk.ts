/**
 * `kgw tenant --table` (and `--ca-secret`) build an AWS SDK client, and on Node.js 20 the SDK
 * prints a 9-line NodeVersionSupportWarning on stderr each time the command runs: noise in
 * every call of an operator's CLI, which can do nothing about it there (moving to Node.js 22 is
 * the real fix, a platform decision). The SDK's documented switch is the environment variable
 * AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED=true, read from process.env while the client
 * is built; the SDK then remembers for the process that the warning was dealt with.
 *
 * So the switch is set here for the construction only, and only if the operator has not set it
 * (empty counts as not set): the server, the agent and anything else keep the SDK's default.
 */
export const NODE_VERSION_WARNING_SWITCH = "AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED";

export function withoutNodeVersionWarning<T>(build: () => T): T {
  // The SDK reads process.env itself: this switch has no other form.
  const env = process.env;
  const before = env[NODE_VERSION_WARNING_SWITCH];
  if (before !== undefined && before !== "") return build();
  env[NODE_VERSION_WARNING_SWITCH] = "true";
  try {
    return build();
  } finally {
    if (before === undefined) delete env[NODE_VERSION_WARNING_SWITCH];
    else env[NODE_VERSION_WARNING_SWITCH] = before;
  }
}
