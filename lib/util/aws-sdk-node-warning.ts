/**
 * The AWS SDK for JavaScript prints a 9-line NodeVersionSupportWarning on stderr, once per
 * process, when a client is built on Node.js older than 22 (its releases after the first week of
 * January 2027 need 22). Node.js 24 is the supported runtime (the image, docs/DEPLOY.md); Node.js
 * 20 still runs the tests and an operator's CLI until it stops working. There the warning is
 * noise in every `kgw tenant --table` and in the server's stderr, about a runtime the operator
 * was already told to leave: it says nothing they can act on in that command.
 *
 * The SDK's documented switch is the environment variable
 * AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED=true, read from process.env while the client
 * is built; the SDK then remembers for the process that the warning was dealt with. So every
 * client we build (lib/registry/dynamo/client.ts, lib/deploy/ca-secret.ts) is built through
 * this function, which sets the switch for the construction only, and only:
 * - below Node.js 22, where the SDK warns at all: from 22 on this is a no-op, and the whole
 *   file can go when Node.js 20 leaves CI;
 * - if the operator has not set it (empty counts as not set).
 *
 * In lib/util/ (it imports nothing) because both the registry and the deployment's secrets use it.
 * It writes process.env, which library code otherwise never touches: the SDK reads the switch
 * there and nowhere else.
 */
export const NODE_VERSION_WARNING_SWITCH = "AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED";

/** The first Node.js major the SDK does not warn about (its `emitWarningIfUnsupportedVersion`). */
export const SDK_SUPPORTED_NODE_MAJOR = 22;

/** Whether the SDK warns on this Node.js version (`process.version`, as "v20.19.0"). */
export function sdkWarnsOnNode(nodeVersion: string): boolean {
  const major = Number.parseInt(nodeVersion.replace(/^v/, ""), 10);
  return Number.isInteger(major) && major < SDK_SUPPORTED_NODE_MAJOR;
}

/** `build()` (a client's construction) without the SDK's Node.js version warning. */
export function withoutNodeVersionWarning<T>(build: () => T, nodeVersion: string = process.version): T {
  if (!sdkWarnsOnNode(nodeVersion)) return build();
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
