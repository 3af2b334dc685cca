/**
 * kube-apiserver's EgressSelectorConfiguration (apiserver.k8s.io/v1beta1, read from
 * --egress-selector-config-file) for a tenant's control plane. The shape follows k8s.io/apiserver
 * `pkg/apis/apiserver/v1beta1` and the rules of its ValidateEgressSelectorConfiguration:
 *
 * - the `cluster` selection is the one that carries traffic to nodes, pods and services;
 * - HTTPConnect over TCP needs an https:// url and a tlsConfig with clientCert and clientKey
 *   (caBundle optional, we always give it: the gateway's certificate is rarely publicly trusted);
 * - over a Unix socket (a gateway next to kube-apiserver) GRPC or HTTPConnect with udsName, and
 *   no TLS.
 *
 * The YAML is written by hand for two fixed shapes: keys are constants, and every value is
 * either plain-safe or written as a double-quoted scalar, so no path can change the structure.
 */
import path from "node:path";

export type UdsProxyProtocol = "GRPC" | "HTTPConnect";

/** Names of the bundle's files, also the names under the mount directory. */
export const BUNDLE_FILES = {
  caBundle: "ca.crt",
  clientCert: "client.crt",
  clientKey: "client.key",
  egressTcp: "egress-selector-configuration.yaml",
  egressUds: "egress-selector-configuration-uds.yaml",
} as const;

export interface TcpEgressOptions {
  tenantId: string;
  /** https://host:port of the gateway. */
  url: string;
  /** Where the bundle's files will be on the kube-apiserver's file system. */
  mountDir: string;
}

export interface UdsEgressOptions {
  tenantId: string;
  udsName: string;
  proxyProtocol: UdsProxyProtocol;
}

export function tcpEgressConfiguration(o: TcpEgressOptions): string {
  const file = (name: string) => path.posix.join(o.mountDir, name);
  return document(`HTTPConnect over TCP with mutual TLS to the gateway, as tenant ${o.tenantId}.`, [
    "    proxyProtocol: HTTPConnect",
    "    transport:",
    "      tcp:",
    `        url: ${scalar(o.url)}`,
    "        tlsConfig:",
    `          caBundle: ${scalar(file(BUNDLE_FILES.caBundle))}`,
    `          clientKey: ${scalar(file(BUNDLE_FILES.clientKey))}`,
    `          clientCert: ${scalar(file(BUNDLE_FILES.clientCert))}`,
  ]);
}

export function udsEgressConfiguration(o: UdsEgressOptions): string {
  return document(
    `${o.proxyProtocol} over the Unix socket of a gateway next to kube-apiserver (tenant ${o.tenantId}); the socket's file permissions are its only protection.`,
    [
      `    proxyProtocol: ${o.proxyProtocol}`,
      "    transport:",
      "      uds:",
      `        udsName: ${scalar(o.udsName)}`,
    ],
  );
}

function document(comment: string, connection: string[]): string {
  return [
    `# kube-apiserver --egress-selector-config-file, written by kgw tenant bundle.`,
    `# ${comment}`,
    "apiVersion: apiserver.k8s.io/v1beta1",
    "kind: EgressSelectorConfiguration",
    "egressSelections:",
    "- name: cluster",
    "  connection:",
    ...connection,
    "",
  ].join("\n");
}

/**
 * Plain when unmistakably a path or URL; otherwise double-quoted with JSON escapes (a subset of
 * YAML's). Values are printable ASCII by the time they get here (the options check it); this
 * refuses anything else rather than rely on how a YAML 1.1 parser (kube-apiserver's) reads it.
 */
export function scalar(value: string): string {
  if (!/^[\x20-\x7e]*$/.test(value)) throw new TypeError(`not printable ASCII: ${JSON.stringify(value)}`);
  return /^(\/|https:\/\/)[A-Za-z0-9_./:@+-]*$/.test(value) ? value : JSON.stringify(value);
}
