/**
 * Everything `kgw demo` can be told: its flags and their defaults. The entrypoint calls
 * `parseDemoCommand` once and hands the plain object to run-demo.ts.
 */
import { defineFlags, formatHelp, parseFlags } from "../../config/flags.js";
import { PORTS_FILE_FLAG } from "../../config/ports-file-flag.js";

export const DEMO_FLAGS = defineFlags({
  dir: {
    kind: "string",
    default: "",
    help: "Where to write the demo CA and certificates (if empty: a new temp dir, removed when the demo ends).",
  },
  once: {
    kind: "bool",
    default: false,
    help: "Exit after the first request instead of serving until Ctrl-C.",
  },
  "ephemeral-ports": {
    kind: "bool",
    default: false,
    help: "Use free ports instead of 8090/8132/8133/8134 (gateway) and 8093/8094 (agent), for when one of them is taken.",
  },
  "log-level": { kind: "string", default: "warn", help: "Log level of the embedded server and agent." },
  "ports-file": {
    ...PORTS_FILE_FLAG,
    help: 'Once the demo request went through, write the gateway\'s ports to this file as one JSON object ({"frontend":8090,"agent":8132,"admin":8133,"health":8134}); removed on exit. Off when empty.',
  },
});

export interface DemoCommand {
  /** "": a new temporary directory. */
  dir: string;
  once: boolean;
  ephemeralPorts: boolean;
  logLevel: string;
  /** "": no --ports-file. */
  portsFile: string;
}

export type ParsedDemoCommand = { help: true; text: string } | { help: false; command: DemoCommand };

export function parseDemoCommand(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): ParsedDemoCommand {
  const f = parseFlags(DEMO_FLAGS, argv, env);
  if (f.help) return { help: true, text: demoHelp() };
  const v = f.values;
  return {
    help: false,
    command: {
      dir: v.dir,
      once: v.once,
      ephemeralPorts: v["ephemeral-ports"],
      logLevel: v["log-level"],
      portsFile: v["ports-file"],
    },
  };
}

export function demoHelp(): string {
  return formatHelp(
    "kgw demo [flags]",
    "Runs a complete local gateway and shows a request going through it.",
    DEMO_FLAGS,
  );
}
