/**
 * The Kubernetes objects that run a tenant's agents: a Namespace, a ServiceAccount that holds no
 * API token, the agent token in a Secret, the gateway's CA in a ConfigMap, the Deployment, and a
 * PodDisruptionBudget.
 *
 * Typed with kubernetes-models' interfaces, so that a misspelt or misplaced field fails the type
 * check (a strict apiserver would refuse it); the imports are types only and vanish from the
 * build, so the package is needed for development, never at run time. The tests validate each
 * object against the Kubernetes schemas as well.
 *
 * The pod meets the "restricted" Pod Security Standard: non-root, no privilege escalation, no
 * capabilities, RuntimeDefault seccomp, and only Secret and ConfigMap volumes.
 */
import type { IDeployment } from "kubernetes-models/apps/v1/Deployment";
import type { IPodDisruptionBudget } from "kubernetes-models/policy/v1/PodDisruptionBudget";
import type { IConfigMap } from "kubernetes-models/v1/ConfigMap";
import type { IContainer } from "kubernetes-models/v1/Container";
import type { INamespace } from "kubernetes-models/v1/Namespace";
import type { IPodSpec } from "kubernetes-models/v1/PodSpec";
import type { IProbe } from "kubernetes-models/v1/Probe";
import type { ISecret } from "kubernetes-models/v1/Secret";
import type { IServiceAccount } from "kubernetes-models/v1/ServiceAccount";
import {
  agentCommand,
  CA_KEY,
  CA_MOUNT_DIR,
  HEALTH_PORT,
  POD_NAME_ENV,
  TOKEN_KEY,
  TOKEN_MOUNT_DIR,
} from "./agent-command.js";
import type { AgentManifestSpec } from "./input.js";

/** Name of the ServiceAccount, the Deployment and the PodDisruptionBudget. */
export const AGENT_NAME = "kgw-agent";
export const TOKEN_SECRET_NAME = "kgw-agent-token";
export const CA_CONFIG_MAP_NAME = "kgw-agent-ca";

export const NAME_LABEL = "app.kubernetes.io/name";
export const PART_OF_LABEL = "app.kubernetes.io/part-of";
/** Which tenant the agents serve: one cluster may run agents of several gateways' tenants. */
export const TENANT_LABEL = "konnectivity-gateway/tenant";
/** On the Secret: the token's public id, as `kgw tenant show` lists it and `revoke` takes it. */
export const TOKEN_ID_ANNOTATION = "konnectivity-gateway/agent-token-id";

/** The user and group of both images (distroless "nonroot"). */
const AGENT_UID = 65532;
/**
 * Secret and ConfigMap files are owned by root; with fsGroup the kubelet gives them the pod's
 * group, so 0440 lets the agent read the token and nobody else in the pod.
 */
const TOKEN_FILE_MODE = 0o440;
const CA_FILE_MODE = 0o444;

/**
 * Sized for our agent (Node): about 60 MiB resident when idle (measured on the compiled agent).
 * An idle tunnel costs little; a busy one may buffer up to its flow-control window (2 MiB, growing
 * to 16 MiB on fast links; lib/tunnel/flow-control.ts), so 512 MiB carries a few dozen tunnels at
 * full speed at once: raise it for a tenant with heavier traffic. No CPU limit would be kinder to
 * latency, but a limit bounds what a runaway agent takes from the tenant's workloads. Upstream's Go
 * agent needs less and fits the same.
 */
const RESOURCES = {
  requests: { cpu: "100m", memory: "128Mi" },
  limits: { cpu: "1", memory: "512Mi" },
};

export type AgentManifestObject =
  | INamespace
  | IServiceAccount
  | ISecret
  | IConfigMap
  | IDeployment
  | IPodDisruptionBudget;

/** The objects in the order `kubectl apply` needs them (the namespace first). */
export function agentManifestObjects(spec: AgentManifestSpec): AgentManifestObject[] {
  const labels = {
    [NAME_LABEL]: AGENT_NAME,
    [PART_OF_LABEL]: "konnectivity-gateway",
    [TENANT_LABEL]: spec.tenantId,
  };
  // The Deployment's selector is immutable: only what can never change for these agents.
  const selector = { [NAME_LABEL]: AGENT_NAME, [TENANT_LABEL]: spec.tenantId };
  const meta = (name: string) => ({ name, namespace: spec.namespace, labels });

  const objects: AgentManifestObject[] = [
    { apiVersion: "v1", kind: "Namespace", metadata: { name: spec.namespace, labels } },
    {
      apiVersion: "v1",
      kind: "ServiceAccount",
      metadata: meta(AGENT_NAME),
      // The agent never calls the Kubernetes API: no API token in its pods.
      automountServiceAccountToken: false,
    },
    {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { ...meta(TOKEN_SECRET_NAME), annotations: { [TOKEN_ID_ANNOTATION]: spec.agentTokenId } },
      type: "Opaque",
      // The token exactly, without a newline: upstream's agent sends the file as it is.
      data: { [TOKEN_KEY]: Buffer.from(spec.agentToken, "utf8").toString("base64") },
    },
    {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: meta(CA_CONFIG_MAP_NAME),
      data: { [CA_KEY]: spec.caPem },
    },
    {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: meta(AGENT_NAME),
      spec: {
        replicas: spec.replicas,
        selector: { matchLabels: selector },
        // A new pod is ready (connected to the gateway) before an old one goes: no gap in tunnels.
        strategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } },
        template: { metadata: { labels }, spec: podSpec(spec, selector) },
      },
    },
  ];
  // With one replica, minAvailable 1 would forbid every eviction and block node drains forever.
  if (spec.replicas > 1) {
    objects.push({
      apiVersion: "policy/v1",
      kind: "PodDisruptionBudget",
      metadata: meta(AGENT_NAME),
      spec: { minAvailable: 1, selector: { matchLabels: selector } },
    });
  }
  return objects;
}

function podSpec(spec: AgentManifestSpec, selector: Record<string, string>): IPodSpec {
  return {
    serviceAccountName: AGENT_NAME,
    automountServiceAccountToken: false,
    // Service environment variables are noise to the agent, and a lot of it in a large namespace.
    enableServiceLinks: false,
    securityContext: {
      runAsNonRoot: true,
      runAsUser: AGENT_UID,
      runAsGroup: AGENT_UID,
      fsGroup: AGENT_UID,
      seccompProfile: { type: "RuntimeDefault" },
    },
    // Replicas on different nodes (and zones where there are any): one node's loss leaves a path.
    affinity: {
      podAntiAffinity: {
        preferredDuringSchedulingIgnoredDuringExecution: [
          {
            weight: 100,
            podAffinityTerm: {
              topologyKey: "kubernetes.io/hostname",
              labelSelector: { matchLabels: selector },
            },
          },
        ],
      },
    },
    topologySpreadConstraints: [
      {
        maxSkew: 1,
        topologyKey: "topology.kubernetes.io/zone",
        // Preferred, not required: a cluster in one zone must still run every replica.
        whenUnsatisfiable: "ScheduleAnyway",
        labelSelector: { matchLabels: selector },
      },
    ],
    containers: [container(spec)],
    volumes: [
      {
        name: "token",
        secret: {
          secretName: TOKEN_SECRET_NAME,
          items: [{ key: TOKEN_KEY, path: TOKEN_KEY }],
          defaultMode: TOKEN_FILE_MODE,
        },
      },
      {
        name: "ca",
        configMap: {
          name: CA_CONFIG_MAP_NAME,
          items: [{ key: CA_KEY, path: CA_KEY }],
          defaultMode: CA_FILE_MODE,
        },
      },
    ],
  };
}

function container(spec: AgentManifestSpec): IContainer {
  const { command, args } = agentCommand(spec.flavor, spec.gateway);
  const probe = (path: string, periodSeconds: number): IProbe => ({
    httpGet: { path, port: HEALTH_PORT, scheme: "HTTP" },
    periodSeconds,
    timeoutSeconds: 5,
    failureThreshold: 3,
  });
  return {
    name: "agent",
    image: spec.image,
    imagePullPolicy: "IfNotPresent",
    command,
    args,
    env: [{ name: POD_NAME_ENV, valueFrom: { fieldRef: { fieldPath: "metadata.name" } } }],
    ports: [{ name: "health", containerPort: HEALTH_PORT, protocol: "TCP" }],
    // /healthz answers while the process runs; /readyz once a gateway connection is up.
    livenessProbe: probe("/healthz", 10),
    readinessProbe: probe("/readyz", 5),
    resources: RESOURCES,
    securityContext: {
      runAsNonRoot: true,
      runAsUser: AGENT_UID,
      runAsGroup: AGENT_UID,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      privileged: false,
      capabilities: { drop: ["ALL"] },
      seccompProfile: { type: "RuntimeDefault" },
    },
    volumeMounts: [
      { name: "token", mountPath: TOKEN_MOUNT_DIR, readOnly: true },
      { name: "ca", mountPath: CA_MOUNT_DIR, readOnly: true },
    ],
  };
}
