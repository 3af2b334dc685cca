/**
 * HTTP/2 flow-control windows sized for WAN round trips.
 *
 * With the 64 KiB default, one HTTP/2 stream moves at most 64 KiB per round trip: about 3 MB/s
 * over a 20 ms link, whatever the bandwidth. An agent stream carries every connection of that
 * agent, so its window bounds their sum. grpc-js sets client windows from the
 * `grpc-node.flow_control_window` channel option; our gRPC server (grpc/server.ts, both the
 * frontend and the agent port) sets the same sizes for its sessions: the per-stream window in
 * SETTINGS, and the connection window
 * (which otherwise caps all streams of a session together at 64 KiB per round trip; on loopback
 * it held a gRPC caller's upload to the pace of the server's WINDOW_UPDATEs).
 *
 * A larger window means more data in flight when a peer dies mid-transfer; that case is
 * handled by `Http2PeerWatch`, not by keeping windows small.
 */

/** Per-stream window: 16 MiB per 20 ms RTT ≈ 800 MB/s for one agent stream. */
export const HTTP2_STREAM_WINDOW_BYTES = 16 * 1024 * 1024;

/**
 * Connection window of server sessions: as large as one stream's, or the stream window would
 * not mean what it says. A frontend session usually carries one tunnel, an agent session one
 * agent stream; either can have at most this much unread data at the server.
 */
export const HTTP2_CONNECTION_WINDOW_BYTES = HTTP2_STREAM_WINDOW_BYTES;

/** Channel options for our gRPC clients (agent, tunnel client). */
export const WAN_CHANNEL_OPTIONS = { "grpc-node.flow_control_window": HTTP2_STREAM_WINDOW_BYTES } as const;
