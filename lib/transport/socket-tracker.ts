import type { Socket } from "node:net";

/**
 * Remembers the raw sockets a listener accepted so shutdown can end the stragglers and tests can
 * assert that nothing is left open.
 */
export class SocketTracker {
  private readonly sockets = new Set<Socket>();

  add(socket: Socket): void {
    this.sockets.add(socket);
    socket.once("close", () => this.sockets.delete(socket));
  }

  get size(): number {
    return this.sockets.size;
  }

  destroyAll(): void {
    for (const s of this.sockets) s.destroy();
  }
}
