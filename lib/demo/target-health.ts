/**
 * Health checks of one load-balancer target, as the NLB does them: an HTTP GET of the target's
 * health URL at an interval, a 200 a success, anything else (another status, a refusal, no answer
 * within the timeout) a failure; the target's state changes only after `threshold` results in a
 * row that disagree with it. A target starts unhealthy and is healthy after its first
 * `threshold` successes (the NLB's "initial" state).
 */
import { get } from "node:http";

export interface HealthCheckSettings {
  intervalMs: number;
  timeoutMs: number;
  threshold: number;
}

export class TargetHealth {
  private healthyNow = false;
  private streak = 0;
  private timer: NodeJS.Timeout | null = null;
  private inFlight: { destroy(): void } | null = null;
  private checks = 0;
  private stopped = false;

  constructor(
    private readonly url: string,
    private readonly settings: HealthCheckSettings,
    private readonly onChange: (healthy: boolean) => void,
  ) {}

  get healthy(): boolean {
    return this.healthyNow;
  }

  /** Checks completed so far (tests wait on it rather than on time). */
  get checksDone(): number {
    return this.checks;
  }

  start(): void {
    if (this.timer || this.stopped) return;
    this.check();
    this.timer = setInterval(() => this.check(), this.settings.intervalMs);
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.inFlight?.destroy();
    this.inFlight = null;
  }

  private check(): void {
    if (this.inFlight) return; // the previous one is still within its timeout
    let done = false;
    const finish = (ok: boolean) => {
      if (done) return;
      done = true;
      this.inFlight = null;
      if (this.stopped) return;
      this.checks++;
      this.record(ok);
    };
    const req = get(this.url, { agent: false, timeout: this.settings.timeoutMs }, (res) => {
      res.resume();
      finish(res.statusCode === 200);
    });
    req.on("timeout", () => req.destroy(new Error("health check timed out")));
    req.on("error", () => finish(false));
    this.inFlight = { destroy: () => req.destroy() };
  }

  private record(ok: boolean): void {
    if (ok === this.healthyNow) {
      this.streak = 0;
      return;
    }
    this.streak++;
    if (this.streak < this.settings.threshold) return;
    this.streak = 0;
    this.healthyNow = ok;
    this.onChange(ok);
  }
}
