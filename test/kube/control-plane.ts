/**
 * The control plane: certificates, etcd, and one kube-apiserver per egress transport, all sharing
 * one etcd (as HA kube-apiservers do), each with its own EgressSelectorConfiguration for the
 * `cluster` egress; and, for the two-tenant phase, one kube-apiserver per tenant, each with its
 * tenant's bundle and its own etcd prefix. They run in the suite's namespace on 127.0.0.1; the
 * test reaches their secure ports through the bridge's Unix sockets.
 */
import { generateKeyPairSync } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { getTestPki, type TestPki } from "../helpers/pki.js";
import type { Proc } from "../interop/harness.js";
import type { NetNs } from "./netns.js";
import {
  ADVERTISE_IP,
  APISERVER_PORTS,
  type ClusterNode,
  type EgressTransport,
  ETCD_CLIENT_PORT,
  ETCD_PEER_PORT,
  FRONTEND_PORT,
  NODE_IP,
  SERVICE_CIDR,
  type TenantCluster,
} from "./topology.js";

export interface KubePki {
  pki: TestPki;
  /** The test's own client certificate: group system:masters. */
  adminCert: string;
  adminKey: string;
  /** The fake kubelet's serving certificate, for NODE_IP. */
  kubeletCert: string;
  kubeletKey: string;
  /** kube-apiserver's client certificate towards kubelets. */
  kubeletClientCert: string;
  kubeletClientKey: string;
  /** Service account token signing key pair. */
  saKey: string;
  saPub: string;
}

/**
 * One CA for everything (the test PKI's): kube-apiserver's serving certificate is the gateway's
 * (localhost, 127.0.0.1), its egress client certificate is the test PKI's frontend certificate.
 */
export async function createKubePki(dir: string): Promise<KubePki> {
  const pki = await getTestPki();
  const [admin, kubelet, kubeletClient] = await Promise.all([
    pki.ca.issue({ commonName: "kgw-kube-test", organization: ["system:masters"], usage: "client" }),
    pki.ca.issue({ commonName: "kgw-node-1", ipAddresses: [NODE_IP], usage: "server" }),
    pki.ca.issue({
      commonName: "kube-apiserver-kubelet-client",
      organization: ["system:masters"],
      usage: "client",
    }),
  ]);
  const sa = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const write = (name: string, text: string) => {
    const file = path.join(dir, name);
    fs.writeFileSync(file, text, { mode: 0o600 });
    return file;
  };
  return {
    pki,
    adminCert: write("admin.pem", admin.certPem),
    adminKey: write("admin-key.pem", admin.keyPem),
    kubeletCert: write("kubelet.pem", kubelet.certPem),
    kubeletKey: write("kubelet-key.pem", kubelet.keyPem),
    kubeletClientCert: write("kubelet-client.pem", kubeletClient.certPem),
    kubeletClientKey: write("kubelet-client-key.pem", kubeletClient.keyPem),
    saKey: write("sa-key.pem", sa.privateKey.export({ type: "pkcs8", format: "pem" }).toString()),
    saPub: write("sa.pem", sa.publicKey.export({ type: "spki", format: "pem" }).toString()),
  };
}

/** A serving certificate for another fake kubelet (kube-apiserver checks it against the node's IP). */
export async function issueKubeletCert(
  kp: KubePki,
  dir: string,
  node: ClusterNode,
): Promise<{ cert: string; key: string }> {
  const issued = await kp.pki.ca.issue({
    commonName: node.nodeName,
    ipAddresses: [node.nodeIp],
    usage: "server",
  });
  const cert = path.join(dir, `kubelet-${node.nodeName}.pem`);
  const key = path.join(dir, `kubelet-${node.nodeName}-key.pem`);
  fs.writeFileSync(cert, issued.certPem, { mode: 0o600 });
  fs.writeFileSync(key, issued.keyPem, { mode: 0o600 });
  return { cert, key };
}

/** Unix socket paths kube-apiserver's egress dials (see servers.ts for who listens on them). */
export interface EgressSockets {
  grpc: string;
  connect: string;
}

export function egressSockets(dir: string): EgressSockets {
  return { grpc: path.join(dir, "egress-grpc.sock"), connect: path.join(dir, "egress-connect.sock") };
}

/** The EgressSelectorConfiguration for one transport, as a kube-apiserver operator writes it. */
export function egressConfig(transport: EgressTransport, pki: TestPki, sockets: EgressSockets): string {
  const f = pki.files;
  const connection = {
    "connect-tcp": [
      "    proxyProtocol: HTTPConnect",
      "    transport:",
      "      tcp:",
      `        url: https://127.0.0.1:${FRONTEND_PORT}`,
      "        tlsConfig:",
      `          caBundle: ${f.caCert}`,
      `          clientCert: ${f.frontendCert}`,
      `          clientKey: ${f.frontendKey}`,
    ],
    "grpc-uds": [
      "    proxyProtocol: GRPC",
      "    transport:",
      "      uds:",
      `        udsName: ${sockets.grpc}`,
    ],
    "connect-uds": [
      "    proxyProtocol: HTTPConnect",
      "    transport:",
      "      uds:",
      `        udsName: ${sockets.connect}`,
    ],
  }[transport];
  return [
    "apiVersion: apiserver.k8s.io/v1beta1",
    "kind: EgressSelectorConfiguration",
    "egressSelections:",
    "- name: cluster",
    "  connection:",
    ...connection,
    "",
  ].join("\n");
}

export function startEtcd(ns: NetNs, dir: string): Proc {
  const url = (port: number) => `http://127.0.0.1:${port}`;
  return ns.spawn("etcd", "etcd", [
    "--name=kgw",
    `--data-dir=${path.join(dir, "etcd")}`,
    `--listen-client-urls=${url(ETCD_CLIENT_PORT)}`,
    `--advertise-client-urls=${url(ETCD_CLIENT_PORT)}`,
    `--listen-peer-urls=${url(ETCD_PEER_PORT)}`,
    `--initial-advertise-peer-urls=${url(ETCD_PEER_PORT)}`,
    `--initial-cluster=kgw=${url(ETCD_PEER_PORT)}`,
    "--logger=zap",
    "--log-level=warn",
  ]);
}

export function startKubeApiserver(
  ns: NetNs,
  bin: string,
  dir: string,
  transport: EgressTransport,
  kp: KubePki,
  sockets: EgressSockets,
): Proc {
  const egressFile = path.join(dir, `egress-${transport}.yaml`);
  fs.writeFileSync(egressFile, egressConfig(transport, kp.pki, sockets));
  return spawnKubeApiserver(ns, bin, `kube-apiserver (${transport})`, kp, {
    port: APISERVER_PORTS[transport],
    certDir: path.join(dir, `kube-apiserver-${transport}`),
    egressFile,
  });
}

/**
 * A tenant's kube-apiserver: its egress configuration is the file `kgw tenant create` wrote,
 * passed as it is; its cluster lives under its own prefix of the shared etcd.
 */
export function startTenantKubeApiserver(
  ns: NetNs,
  bin: string,
  dir: string,
  cluster: TenantCluster,
  egressFile: string,
  kp: KubePki,
): Proc {
  return spawnKubeApiserver(ns, bin, `kube-apiserver (tenant ${cluster.id})`, kp, {
    port: cluster.apiserverPort,
    certDir: path.join(dir, `kube-apiserver-${cluster.id}`),
    egressFile,
    etcdPrefix: cluster.etcdPrefix,
  });
}

function spawnKubeApiserver(
  ns: NetNs,
  bin: string,
  name: string,
  kp: KubePki,
  o: { port: number; certDir: string; egressFile: string; etcdPrefix?: string },
): Proc {
  const f = kp.pki.files;
  fs.mkdirSync(o.certDir, { recursive: true });
  return ns.spawn(name, bin, [
    `--etcd-servers=http://127.0.0.1:${ETCD_CLIENT_PORT}`,
    ...(o.etcdPrefix ? [`--etcd-prefix=${o.etcdPrefix}`] : []),
    "--bind-address=127.0.0.1",
    `--secure-port=${o.port}`,
    `--advertise-address=${ADVERTISE_IP}`,
    // Several kube-apiservers share one advertise address here; none of them owns the endpoints
    // of the `kubernetes` service.
    "--endpoint-reconciler-type=none",
    `--cert-dir=${o.certDir}`,
    `--tls-cert-file=${f.serverCert}`,
    `--tls-private-key-file=${f.serverKey}`,
    `--client-ca-file=${f.caCert}`,
    "--authorization-mode=Node,RBAC",
    `--service-account-issuer=https://kubernetes.default.svc`,
    `--service-account-key-file=${kp.saPub}`,
    `--service-account-signing-key-file=${kp.saKey}`,
    `--service-cluster-ip-range=${SERVICE_CIDR}`,
    `--kubelet-client-certificate=${kp.kubeletClientCert}`,
    `--kubelet-client-key=${kp.kubeletClientKey}`,
    `--kubelet-certificate-authority=${f.caCert}`,
    "--kubelet-preferred-address-types=InternalIP",
    `--egress-selector-config-file=${o.egressFile}`,
    "--profiling=false",
    "--v=1",
  ]);
}
