/**
 * Resources that live as long as one scenario (processes, sockets, clients). Released in reverse
 * order of acquisition, each at most once, even when the scenario failed half way.
 */
export class Scope {
  private readonly disposers: (() => void | Promise<void>)[] = [];

  defer(dispose: () => void | Promise<void>): void {
    this.disposers.push(dispose);
  }

  async close(): Promise<void> {
    while (this.disposers.length > 0) {
      const dispose = this.disposers.pop()!;
      try {
        await dispose();
      } catch {
        // Best effort: one failing disposer must not keep the others from running.
      }
    }
  }
}
