/**
 * Tunnel packets as plain, typed values. The wire `Packet` carries a `type` and a `oneof`
 * payload; we flatten the payload into the packet so a switch on `type` narrows to exactly the
 * fields that packet has. int64 fields are bigint: upstream dial randoms use the full 63 bits.
 */

export const PacketType = {
  DIAL_REQ: 0,
  DIAL_RSP: 1,
  CLOSE_REQ: 2,
  CLOSE_RSP: 3,
  DATA: 4,
  DIAL_CLS: 5,
  DRAIN: 6,
  /**
   * Our extension, never sent to an upstream peer: per-connection flow-control credit. Only used
   * on streams where both ends agreed to it in metadata (see lib/tunnel/flow-control.ts).
   */
  KGW_CREDIT: 100,
  /**
   * Our extension, server to agent only, on streams whose agent asked for it in metadata: the
   * serverCount the server would answer now (lib/tunnel/server-count-updates.ts).
   */
  KGW_SERVER_COUNT: 101,
} as const;
export type PacketType = (typeof PacketType)[keyof typeof PacketType];

export interface DialRequestPacket {
  type: typeof PacketType.DIAL_REQ;
  protocol: string;
  address: string;
  random: bigint;
  /**
   * Our extension (field 100 of DialRequest, far from upstream's): the tenant's egress policy,
   * sent only to agents that asked for it in metadata (lib/egress/egress-wire.ts).
   */
  egress?: string;
}

export interface DialResponsePacket {
  type: typeof PacketType.DIAL_RSP;
  error: string;
  connectId: bigint;
  random: bigint;
  /**
   * Our extension (field 100 of DialResponse): the typed reason of a failed dial, sent only
   * between gateway instances on the peer port (lib/fleet/peer/peer-outcome.ts).
   */
  failure?: string;
  /**
   * Our extension (field 101 of DialResponse): the agent the owner chose for a forwarded dial,
   * for the forwarding instance's audit record; peer port only, like `failure`.
   */
  agent?: string;
}

export interface CloseRequestPacket {
  type: typeof PacketType.CLOSE_REQ;
  connectId: bigint;
}

export interface CloseResponsePacket {
  type: typeof PacketType.CLOSE_RSP;
  error: string;
  connectId: bigint;
  /**
   * Our extension (field 100 of CloseResponse, as DialResponse's): the typed reason a forwarded
   * tunnel ended at its owner (ERR_DRAINED: a drain, not a break); peer port only.
   */
  failure?: string;
}

export interface DataPacket {
  type: typeof PacketType.DATA;
  connectId: bigint;
  error: string;
  /** A view into the received message buffer when decoded; never copied on the way in. */
  data: Uint8Array;
}

export interface CloseDialPacket {
  type: typeof PacketType.DIAL_CLS;
  random: bigint;
}

export interface DrainPacket {
  type: typeof PacketType.DRAIN;
}

/** The receiver of `connectId` has consumed `bytes` more: the sender may send that much more. */
export interface CreditPacket {
  type: typeof PacketType.KGW_CREDIT;
  connectId: bigint;
  bytes: bigint;
}

/** The serverCount a connecting agent would be told now. */
export interface ServerCountPacket {
  type: typeof PacketType.KGW_SERVER_COUNT;
  count: bigint;
}

/**
 * A packet whose `type` this build does not know. Decoded rather than rejected so that a newer
 * peer cannot crash an older one: handlers log it and carry on, as upstream does.
 */
export interface UnknownPacket {
  type: "unknown";
  rawType: number;
}

export type Packet =
  | DialRequestPacket
  | DialResponsePacket
  | CloseRequestPacket
  | CloseResponsePacket
  | DataPacket
  | CloseDialPacket
  | DrainPacket
  | CreditPacket
  | ServerCountPacket
  | UnknownPacket;

const TYPE_NAMES: Record<number, string> = {
  0: "DIAL_REQ",
  1: "DIAL_RSP",
  2: "CLOSE_REQ",
  3: "CLOSE_RSP",
  4: "DATA",
  5: "DIAL_CLS",
  6: "DRAIN",
  100: "KGW_CREDIT",
  101: "KGW_SERVER_COUNT",
};

/** Upstream's name for a packet type, as used in metric labels and logs. */
export function packetTypeName(packet: Packet): string {
  return packet.type === "unknown" ? "UNKNOWN" : (TYPE_NAMES[packet.type] ?? "UNKNOWN");
}

export const dialRequest = (
  address: string,
  random: bigint,
  protocol = "tcp",
  egress?: string,
): DialRequestPacket =>
  egress === undefined
    ? { type: PacketType.DIAL_REQ, protocol, address, random }
    : { type: PacketType.DIAL_REQ, protocol, address, random, egress };

export const dialResponse = (random: bigint, connectId: bigint, error = ""): DialResponsePacket => ({
  type: PacketType.DIAL_RSP,
  error,
  connectId,
  random,
});

export const closeRequest = (connectId: bigint): CloseRequestPacket => ({
  type: PacketType.CLOSE_REQ,
  connectId,
});

export const closeResponse = (connectId: bigint, error = "", failure?: string): CloseResponsePacket =>
  failure === undefined
    ? { type: PacketType.CLOSE_RSP, error, connectId }
    : { type: PacketType.CLOSE_RSP, error, connectId, failure };

export const dataPacket = (connectId: bigint, data: Uint8Array, error = ""): DataPacket => ({
  type: PacketType.DATA,
  connectId,
  error,
  data,
});

export const closeDial = (random: bigint): CloseDialPacket => ({ type: PacketType.DIAL_CLS, random });

export const drain = (): DrainPacket => ({ type: PacketType.DRAIN });

export const credit = (connectId: bigint, bytes: number): CreditPacket => ({
  type: PacketType.KGW_CREDIT,
  connectId,
  bytes: BigInt(bytes),
});

export const serverCountUpdate = (count: number): ServerCountPacket => ({
  type: PacketType.KGW_SERVER_COUNT,
  count: BigInt(count),
});
