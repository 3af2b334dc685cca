/** Small timing helpers. Every wait in the benchmark is bounded. */
import { performance } from "node:perf_hooks";

export const now = (): number => performance.now();

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Like sleep, but over as soon as `signal` aborts: the pacing of loops that run until told to stop. */
export function pause(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}

/** Rejects with a message naming `what` when `promise` takes longer than `ms`. */
export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no result within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Polls `cond` every 50 ms until it holds or `ms` passed. */
export async function waitUntil(
  cond: () => boolean | Promise<boolean>,
  ms: number,
  what: string,
  explain: () => string = () => "",
): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      if (await cond()) return;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) {
      const extra = explain();
      throw new Error(`${what}: not within ${ms} ms${extra ? `\n${extra}` : ""}`);
    }
    await sleep(50);
  }
}

/**
 * Runs `count` tasks with at most `concurrency` in flight; rejects on the first failure (the
 * tasks already started still run to their own end).
 */
export async function inBatches(count: number, concurrency: number, task: (i: number) => Promise<void>) {
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      await task(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
}

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
