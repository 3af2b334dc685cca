/**
 * What kubelet, the scheduler and kube-controller-manager would write, written by the test (none
 * of them runs): the node with its InternalIP and kubelet port, a pod bound to it with its IP, a
 * service and its endpoints, and the `default` service account the admission plugin looks for.
 */
import type { KubeClient, KubeResponse } from "./kube-client.js";
import {
  type ClusterNode,
  CONTAINER,
  DEFAULT_NODE,
  KUBELET_PORT,
  POD_PORT,
  SERVICE_NAME,
} from "./topology.js";

const MERGE_PATCH = "application/merge-patch+json";

function ok(res: KubeResponse, what: string, also: number[] = []): void {
  if ((res.status < 200 || res.status > 299) && !also.includes(res.status)) {
    throw new Error(`${what}: ${res.status} ${res.text}`);
  }
}

/** Writes them into the cluster `kube` talks to, for `node` (each tenant's cluster has its own). */
export async function createClusterObjects(
  kube: KubeClient,
  node: ClusterNode = DEFAULT_NODE,
): Promise<void> {
  ok(
    await kube.call("POST", "/api/v1/namespaces/default/serviceaccounts", {
      json: { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "default" } },
    }),
    "service account",
    [409],
  );

  const ready = [{ type: "Ready", status: "True", reason: "KubeletReady", message: "fake kubelet" }];
  ok(
    await kube.call("POST", "/api/v1/nodes", {
      json: { apiVersion: "v1", kind: "Node", metadata: { name: node.nodeName, labels: { role: "fake" } } },
    }),
    "node",
  );
  ok(
    await kube.call("PATCH", `/api/v1/nodes/${node.nodeName}/status`, {
      contentType: MERGE_PATCH,
      json: {
        status: {
          addresses: [{ type: "InternalIP", address: node.nodeIp }],
          daemonEndpoints: { kubeletEndpoint: { Port: KUBELET_PORT } },
          conditions: ready,
          // A 1.36 kubelet declares that it serves exec over WebSocket itself; kube-apiserver then
          // proxies kubectl's WebSocket to it instead of translating it to SPDY.
          declaredFeatures: ["ExtendWebSocketsToKubelet"],
        },
      },
    }),
    "node status",
  );

  ok(
    await kube.call("POST", "/api/v1/namespaces/default/pods", {
      json: {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: node.podName, labels: { app: "web" } },
        spec: {
          nodeName: node.nodeName,
          automountServiceAccountToken: false,
          containers: [
            { name: CONTAINER, image: "registry.invalid/web:1", ports: [{ containerPort: POD_PORT }] },
          ],
        },
      },
    }),
    "pod",
  );
  ok(
    await kube.call("PATCH", `/api/v1/namespaces/default/pods/${node.podName}/status`, {
      contentType: MERGE_PATCH,
      json: {
        status: {
          phase: "Running",
          hostIP: node.nodeIp,
          hostIPs: [{ ip: node.nodeIp }],
          podIP: node.podIp,
          podIPs: [{ ip: node.podIp }],
          conditions: ready.map((c) => ({ ...c, reason: undefined, message: undefined })),
        },
      },
    }),
    "pod status",
  );

  ok(
    await kube.call("POST", "/api/v1/namespaces/default/services", {
      json: {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name: SERVICE_NAME },
        spec: { selector: { app: "web" }, ports: [{ name: "http", port: 80, targetPort: POD_PORT }] },
      },
    }),
    "service",
  );
  // The service proxy picks an address from the Endpoints (and checks it is the pod's IP).
  ok(
    await kube.call("POST", "/api/v1/namespaces/default/endpoints", {
      json: {
        apiVersion: "v1",
        kind: "Endpoints",
        metadata: { name: SERVICE_NAME },
        subsets: [
          {
            addresses: [
              {
                ip: node.podIp,
                nodeName: node.nodeName,
                targetRef: { kind: "Pod", namespace: "default", name: node.podName },
              },
            ],
            ports: [{ name: "http", port: POD_PORT, protocol: "TCP" }],
          },
        ],
      },
    }),
    "endpoints",
  );
}
