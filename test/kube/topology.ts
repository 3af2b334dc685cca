/**
 * Where everything lives. Every process of the suite runs in one private network namespace
 * created by the test, whose only interface is its own `lo`: the control plane on 127.0.0.1, the
 * fake kubelet and pod on test addresses added to that `lo`. Nothing can reach, or be reached
 * from, any other network; fixed port numbers are safe because the namespace starts empty.
 */

/** kube-apiserver refuses to proxy to loopback or link-local addresses, so the "cluster" gets these. */
export const NODE_NAME = "kgw-node-1";
export const NODE_IP = "10.250.0.2";
export const KUBELET_PORT = 10250;
export const POD_NAME = "web-0";
export const POD_IP = "10.250.1.5";
export const POD_PORT = 8080;
export const CONTAINER = "web";
export const SERVICE_NAME = "web";
/** What the fake kubelet answers for the container's logs. */
export const LOG_TEXT = "line 1 from the container\nline 2 from the container\n";
/** kube-apiserver needs an advertise address (the namespace has no default route to pick one from). */
export const ADVERTISE_IP = "10.250.255.1";
export const SERVICE_CIDR = "10.251.0.0/24";

/** One cluster's node and pod, as the suite writes them (cluster-objects.ts) and fakes them (fake-node.ts). */
export interface ClusterNode {
  nodeName: string;
  nodeIp: string;
  podName: string;
  podIp: string;
}
export const DEFAULT_NODE: ClusterNode = {
  nodeName: NODE_NAME,
  nodeIp: NODE_IP,
  podName: POD_NAME,
  podIp: POD_IP,
};

/**
 * The two-tenant phase: two clusters, each its own kube-apiserver (on the shared etcd, under its
 * own prefix) and its own node and pod on addresses of their own, served by one gateway in
 * tenant mode. The prefixes are not string prefixes of each other or of the default `/registry`.
 */
export interface TenantCluster extends ClusterNode {
  id: string;
  apiserverPort: number;
  etcdPrefix: string;
  /** Whose agent serves the tenant (upstream's must work with a tenant's token as well as ours). */
  agent: "ours" | "upstream";
  /** The agent's health and admin ports: an index into AGENT_PORTS. */
  agentSlot: number;
}
export const TENANT_CLUSTERS: readonly TenantCluster[] = [
  {
    id: "acme",
    apiserverPort: 6451,
    etcdPrefix: "/tenant-acme/registry",
    nodeName: "acme-node-1",
    nodeIp: "10.250.0.3",
    podName: "acme-web-0",
    podIp: "10.250.1.6",
    agent: "ours",
    agentSlot: 0,
  },
  {
    id: "globex",
    apiserverPort: 6452,
    etcdPrefix: "/tenant-globex/registry",
    nodeName: "globex-node-1",
    nodeIp: "10.250.0.4",
    podName: "globex-web-0",
    podIp: "10.250.1.7",
    agent: "upstream",
    agentSlot: 1,
  },
];

export const NAMESPACE_ADDRESSES = [
  NODE_IP,
  POD_IP,
  ADVERTISE_IP,
  ...TENANT_CLUSTERS.flatMap((c) => [c.nodeIp, c.podIp]),
];

export const ETCD_CLIENT_PORT = 2379;
export const ETCD_PEER_PORT = 2380;

/** The three egress transports kube-apiserver accepts; one kube-apiserver for each, all on one etcd. */
export type EgressTransport = "connect-tcp" | "grpc-uds" | "connect-uds";
export const TRANSPORTS: readonly EgressTransport[] = ["connect-tcp", "grpc-uds", "connect-uds"];
export const TRANSPORT_NAMES: Record<EgressTransport, string> = {
  "connect-tcp": "HTTPConnect over TCP+mTLS",
  "grpc-uds": "GRPC over the Unix socket",
  "connect-uds": "HTTPConnect over the Unix socket",
};
export const APISERVER_PORTS: Record<EgressTransport, number> = {
  "connect-tcp": 6441,
  "grpc-uds": 6442,
  "connect-uds": 6443,
};

/** kube-apiserver's HTTPConnect-over-TCP egress always dials this port (whichever server is up). */
export const FRONTEND_PORT = 8090;

/** Our gateway: the documented default ports. */
export const KGW_PORTS = { agent: 8132, admin: 8133, health: 8134 } as const;
/** Our gateway in tenant mode: agents and kube-apiservers both come to its agent port. */
export const KGW_TENANT_PORTS = { agent: 8172, admin: 8173, health: 8174 } as const;

/** Upstream proxy-server serves one mode on one listener, so that phase runs one per transport. */
export const UPSTREAM_SERVER_PORTS: Record<
  EgressTransport,
  { agent: number; admin: number; health: number }
> = {
  "connect-tcp": { agent: 8142, admin: 8143, health: 8144 },
  "grpc-uds": { agent: 8152, admin: 8153, health: 8154 },
  "connect-uds": { agent: 8162, admin: 8163, health: 8164 },
};

/** Agents' own health and admin ports (several agents run at once in the upstream-server phase). */
export const AGENT_PORTS: readonly { health: number; admin: number }[] = [
  { health: 8093, admin: 8094 },
  { health: 8193, admin: 8194 },
  { health: 8293, admin: 8294 },
  { health: 8393, admin: 8394 },
];

/** Ports the test reaches from outside the namespace, through Unix sockets (see bridge.ts). */
export const BRIDGED_PORTS: readonly number[] = [
  ETCD_CLIENT_PORT,
  ...Object.values(APISERVER_PORTS),
  KGW_PORTS.admin,
  KGW_PORTS.health,
  ...TENANT_CLUSTERS.map((c) => c.apiserverPort),
  KGW_TENANT_PORTS.admin,
  KGW_TENANT_PORTS.health,
  ...Object.values(UPSTREAM_SERVER_PORTS).flatMap((p) => [p.admin, p.health]),
  ...AGENT_PORTS.flatMap((p) => [p.admin, p.health]),
];
