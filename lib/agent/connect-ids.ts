/**
 * Hands out connectIDs for backend connections. One allocator per agent, shared by all its server
 * connections, so an ID names one backend connection across the whole agent: logs and metrics
 * from different servers never show two connections under the same ID. IDs start at 1 because 0
 * means "no connection" on the wire. int64 on the wire, hence bigint.
 */
export class ConnectIdAllocator {
  private last = 0n;

  next(): bigint {
    this.last += 1n;
    return this.last;
  }
}
