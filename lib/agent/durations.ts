/**
 * The agent's fixed durations, each with its reason. Durations an operator may need to change are
 * flags instead (lib/config/agent-options.ts).
 *
 * One durations file per side: this one; the server's and its fleet's in lib/server/durations.ts;
 * the tunnel protocol's, shared by both sides, in lib/tunnel/durations.ts; the registry's in
 * lib/registry/durations.ts.
 */

/**
 * How long a new server stream may take to answer with its headers (serverID, serverCount), TLS
 * included. Upstream waits forever (a TODO in its code); an LB that accepts TCP and never
 * forwards, or a frozen server whose kernel still completes the TCP handshake, would then stall
 * the sync loop. A healthy server answers in a few round trips plus a token check, well under a
 * second; 5 s leaves room for a loaded one on a long path, and hedging (CONNECT_HEDGE_AFTER_MS)
 * means an agent with no server does not wait this long for a live one.
 */
export const SERVER_HANDSHAKE_TIMEOUT_MS = 5_000;

/**
 * While the agent holds no server, a connect attempt unanswered for this long is joined by
 * another (lib/agent/client-set.ts): the slow one may have landed on a frozen server behind the
 * load balancer. A healthy server answers within a few round trips, far below it.
 */
export const CONNECT_HEDGE_AFTER_MS = 1_000;

/**
 * After CLOSE_REQ the backend socket is half-closed so bytes already written still reach the
 * backend; if the backend neither reads them nor closes within this time, the socket is
 * destroyed. Bounded so a stuck backend cannot pin a socket forever.
 */
export const BACKEND_CLOSE_FLUSH_TIMEOUT_MS = 5_000;

/**
 * TCP keepalive on backend sockets, as Go's net.Dialer enables by default (15s): a backend that
 * vanished without a FIN is noticed instead of holding a connection open forever.
 */
export const BACKEND_TCP_KEEPALIVE_MS = 15_000;

/**
 * How long a stopping agent waits for a server to end its side after we ended ours (the end
 * follows our DRAIN, so the server has read it once it answers). A server answers in one round
 * trip: ours ends the stream when it sees the agent's end, upstream's Connect handler returns on
 * EOF. One that has not answered by then is not reading, and must not hold up the agent's exit.
 */
export const SERVER_STREAM_END_GRACE_MS = 1_000;

/**
 * How long the agent waits for a draining server to end its side after the agent ended the
 * stream it no longer needs (its last tunnel there is done). Longer than SERVER_STREAM_END_GRACE_MS:
 * the server reads our end only after the last tunnels' bytes before it, which it delivers at its
 * callers' pace (an upstream server pauses the stream while a caller is slow). Cutting earlier
 * would drop those bytes; a server that never answers must still not hold the connection forever.
 */
export const SERVER_DRAINED_END_GRACE_MS = 10_000;

/**
 * Liveness of a server stream on our server (kgw-tunnel/1, or gRPC once the endpoint is known to
 * be ours): after this long without hearing anything from the server, the agent PINGs it. A
 * frozen server (SIGSTOP, a hung VM) keeps its TCP connection, so nothing else would tell; without
 * this an agent stayed on one for as long as it was frozen (its keepalive is an hour, upstream's
 * default). 5 s keeps an idle fleet cheap: one tiny frame and its answer per stream per 5 s.
 */
export const SERVER_PING_AFTER_SILENCE_MS = 5_000;

/**
 * How long that PING may go unanswered before the stream is dropped and the agent connects
 * elsewhere. The answer comes below the packet layer, so a busy server answers it too; 3 s is
 * many round trips even on a long path, so a server that has not answered is not running.
 */
export const SERVER_PING_TIMEOUT_MS = 3_000;

/**
 * After a server answered ALPN with h2, connections to this endpoint go straight to gRPC for a
 * while instead of probing each time (server-connection.ts). Not only to save a handshake: behind
 * a round-robin load balancer, probe and fallback land on alternate servers, and an agent that
 * always probed would reach only every other one.
 */
export const TUNNEL_REPROBE_MS = 10 * 60_000;
