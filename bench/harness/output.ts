/**
 * Where a run's child processes write: one file per child under the run's output directory,
 * `<dir>/<section>/<child>.log`, stdout and stderr together. Never a pipe into the benchmark
 * process: it is also the client, and a chatty child (upstream at its default verbosity writes
 * about two lines per packet) would make the client pay for that child's logging.
 */
import { closeSync, mkdirSync, mkdtempSync, openSync, readdirSync, readSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

/** Bytes read at a time when counting a log file's lines. */
const COUNT_CHUNK_BYTES = 1024 * 1024;
const NEWLINE = 0x0a;

export interface LogVolume {
  /** File name within its section, e.g. `kgw-server.log`. */
  file: string;
  lines: number;
  bytes: number;
}

export class RunOutput {
  private readonly taken = new Map<string, number>();

  private constructor(readonly dir: string) {
    mkdirSync(dir, { recursive: true });
  }

  /** `dir` when given (created if missing), else a fresh directory under the system's tmpdir. */
  static create(dir: string | undefined, prefix: string): RunOutput {
    return new RunOutput(dir ? path.resolve(dir) : mkdtempSync(path.join(tmpdir(), prefix)));
  }

  /** A subdirectory for one scenario (or one part of a run). */
  section(name: string): RunOutput {
    return new RunOutput(path.join(this.dir, name));
  }

  /** A file of its own for a child named `name`; names that repeat get `-2`, `-3`, … */
  fileFor(name: string): string {
    const n = (this.taken.get(name) ?? 0) + 1;
    this.taken.set(name, n);
    return path.join(this.dir, n === 1 ? `${name}.log` : `${name}-${n}.log`);
  }

  /** Lines and bytes each child wrote into this section, by file. */
  volumes(): LogVolume[] {
    return readdirSync(this.dir)
      .filter((f) => f.endsWith(".log"))
      .sort()
      .map((file) => ({ file, ...countLines(path.join(this.dir, file)) }));
  }
}

function countLines(file: string): { lines: number; bytes: number } {
  const fd = openSync(file, "r");
  const buf = Buffer.allocUnsafe(COUNT_CHUNK_BYTES);
  let lines = 0;
  let bytes = 0;
  try {
    for (;;) {
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      bytes += n;
      for (let i = buf.indexOf(NEWLINE, 0); i !== -1 && i < n; i = buf.indexOf(NEWLINE, i + 1)) lines++;
    }
  } finally {
    closeSync(fd);
  }
  return { lines, bytes };
}
