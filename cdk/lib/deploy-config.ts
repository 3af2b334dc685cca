/**
 * Everything the CDK app can be told, in one place: the context keys, their defaults and their
 * validation. `cdk/bin/kgw.ts` calls `readDeployConfig` once with the app's context and hands the
 * plain object to the stacks; nothing below the app reads context or the environment.
 *
 * Keys are given in cdk.json's "context" or with `-c kgw:<key>=<value>` (strings from the
 * command line, JSON values from cdk.json; both are accepted). docs/DEPLOY.md lists them.
 */
import { imageReferenceProblem } from "../../lib/tenancy/manifest/images.js";
import { defaultKgwAgentImage, parseReleaseStamp } from "../../lib/tenancy/manifest/release-stamp.js";
import { lifecycleTimings } from "./timing.js";

export const CONTEXT_PREFIX = "kgw:";

/** How the install URL's certificate is obtained (the NLB's TLS 443 listener). */
export type InstallCertificateSource =
  /** A DNS-validated ACM certificate and an alias record, both in this hosted zone. */
  | { kind: "hosted-zone"; zoneId: string; zoneName: string }
  /** An ACM certificate that already exists in the stack's region; DNS is the operator's. */
  | { kind: "certificate"; certificateArn: string };

export type GatewayImageSource =
  /** Built from the repository's Dockerfile by `cdk deploy` (a CDK image asset). */
  | { kind: "asset" }
  /** An image already pushed somewhere the tasks can pull from. */
  | { kind: "registry"; reference: string };

export interface DeployConfig {
  /** Prefix of the stack names, so that several gateways can live in one account. */
  stackPrefix: string;
  /** undefined: environment-agnostic stacks (allowed unless a VPC is looked up). */
  account: string | undefined;
  region: string | undefined;
  /** The gateway's public name: agents and kube-apiservers dial it on 8132, kubectl fetches on 443. */
  domainName: string;
  certificate: InstallCertificateSource;
  /** An existing VPC to look up; null: the app creates one. */
  vpcId: string | null;
  /** NAT gateways of a VPC the app creates (one per AZ up to this many). */
  natGateways: number;
  desiredCount: number;
  maxCount: number;
  taskCpu: number;
  taskMemoryMiB: number;
  image: GatewayImageSource;
  /**
   * The agent image the install route puts in manifests: given, or this version's published
   * image (by digest with release.json, by tag without).
   */
  agentImage: string;
  gracefulShutdownSeconds: number;
  /** Autoscaling: target concurrent NLB flows per task. */
  connectionsPerTask: number;
  /** Autoscaling: target average CPU of the service. */
  cpuTargetPercent: number;
  logRetentionDays: number;
  auditLogRetentionDays: number;
  /** SNS topic the alarms notify; null: alarms without actions (see them in the console). */
  alarmTopicArn: string | null;
  /** Who may reach the NLB's listeners (8132 and 443). */
  allowedCidrs: string[];
}

/** Fargate's CPU units and the memory (MiB) each allows: the task sizes Fargate accepts. */
const FARGATE_SIZES: Readonly<Record<number, { min: number; max: number; step: number }>> = {
  256: { min: 512, max: 2048, step: 512 },
  512: { min: 1024, max: 4096, step: 1024 },
  1024: { min: 2048, max: 8192, step: 1024 },
  2048: { min: 4096, max: 16384, step: 1024 },
  4096: { min: 8192, max: 30720, step: 1024 },
  8192: { min: 16384, max: 61440, step: 4096 },
  16384: { min: 32768, max: 122880, step: 8192 },
};

/** The retention periods CloudWatch Logs accepts, in days. */
const LOG_RETENTION_DAYS = [
  1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653,
];

/**
 * Two tasks is the floor: one per AZ, so an AZ outage or a task being replaced never leaves the
 * fleet without an instance, and a tenant with two agents keeps one through either.
 */
export const MIN_TASKS = 2;

export class DeployConfigError extends Error {
  override readonly name = "DeployConfigError";
}

type ContextReader = (key: string) => unknown;

/**
 * Reads and checks the app's configuration. `context` is `app.node.tryGetContext`; `env` gives
 * CDK_DEFAULT_ACCOUNT/REGION, which the CDK CLI sets from the operator's credentials;
 * `releaseStamp` is the text of the checkout's release.json, if it has one
 * (lib/tenancy/manifest/release-stamp.ts).
 */
export function readDeployConfig(
  context: ContextReader,
  env: Readonly<Record<string, string | undefined>> = {},
  releaseStamp: string | null = null,
): DeployConfig {
  const read = (key: string): unknown => context(`${CONTEXT_PREFIX}${key}`);
  const str = (key: string): string | null => {
    const v = read(key);
    if (v === undefined || v === null || v === "") return null;
    if (typeof v !== "string") throw new DeployConfigError(`${CONTEXT_PREFIX}${key}: expected a string`);
    return v.trim();
  };
  const int = (key: string, fallback: number, min: number, max: number): number => {
    const v = read(key);
    if (v === undefined || v === null || v === "") return fallback;
    const n = typeof v === "number" ? v : typeof v === "string" && /^\d+$/.test(v.trim()) ? Number(v) : NaN;
    if (!Number.isInteger(n) || n < min || n > max) {
      throw new DeployConfigError(`${CONTEXT_PREFIX}${key}: expected an integer from ${min} to ${max}`);
    }
    return n;
  };

  const domainName = str("domainName");
  if (!domainName) {
    throw new DeployConfigError(
      `${CONTEXT_PREFIX}domainName is required: the gateway's public DNS name (e.g. gateway.example.com)`,
    );
  }
  if (!/^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/.test(domainName)) {
    throw new DeployConfigError(`${CONTEXT_PREFIX}domainName: "${domainName}" is not a lower-case DNS name`);
  }

  const certificate = readCertificate(str("hostedZoneId"), str("hostedZoneName"), str("certificateArn"));
  if (certificate.kind === "hosted-zone") {
    const zone = certificate.zoneName.replace(/\.$/, "");
    if (domainName !== zone && !domainName.endsWith(`.${zone}`)) {
      throw new DeployConfigError(
        `${CONTEXT_PREFIX}domainName ${domainName} is not in the hosted zone ${certificate.zoneName}`,
      );
    }
  }

  const account = str("account") ?? env.CDK_DEFAULT_ACCOUNT ?? undefined;
  const region = str("region") ?? env.CDK_DEFAULT_REGION ?? undefined;
  if (account !== undefined && !/^\d{12}$/.test(account)) {
    throw new DeployConfigError(`${CONTEXT_PREFIX}account: expected a 12-digit AWS account id`);
  }
  if (region !== undefined && !/^[a-z]{2}(-[a-z]+)+-\d$/.test(region)) {
    throw new DeployConfigError(`${CONTEXT_PREFIX}region: "${region}" is not an AWS region name`);
  }

  const vpcId = str("vpcId");
  if (vpcId !== null) {
    if (!/^vpc-[0-9a-f]{8,17}$/.test(vpcId)) {
      throw new DeployConfigError(`${CONTEXT_PREFIX}vpcId: "${vpcId}" is not a VPC id`);
    }
    if (account === undefined || region === undefined) {
      throw new DeployConfigError(
        `${CONTEXT_PREFIX}vpcId needs ${CONTEXT_PREFIX}account and ${CONTEXT_PREFIX}region (or AWS credentials): an existing VPC is looked up in one account and region`,
      );
    }
  }

  const desiredCount = int("desiredCount", MIN_TASKS, MIN_TASKS, 1000);
  const maxCount = int("maxCount", Math.max(10, desiredCount), desiredCount, 1000);
  const taskCpu = int("taskCpu", 1024, 256, 16384);
  const taskMemoryMiB = int("taskMemoryMiB", 2048, 512, 122880);
  const size = FARGATE_SIZES[taskCpu];
  if (!size) {
    throw new DeployConfigError(
      `${CONTEXT_PREFIX}taskCpu: ${taskCpu} is not a Fargate size (${Object.keys(FARGATE_SIZES).join(", ")})`,
    );
  }
  if (taskMemoryMiB < size.min || taskMemoryMiB > size.max || (taskMemoryMiB - size.min) % size.step !== 0) {
    throw new DeployConfigError(
      `${CONTEXT_PREFIX}taskMemoryMiB: Fargate takes ${size.min}-${size.max} MiB in steps of ${size.step} with ${taskCpu} CPU units`,
    );
  }

  const imageText = str("image") ?? "asset";
  let image: GatewayImageSource;
  if (imageText === "asset") image = { kind: "asset" };
  else {
    const problem = imageReferenceProblem(imageText);
    if (problem) throw new DeployConfigError(`${CONTEXT_PREFIX}image: ${problem}`);
    image = { kind: "registry", reference: imageText };
  }
  const agentImage = str("agentImage") ?? releasedAgentImage(releaseStamp);
  const agentImageProblem = imageReferenceProblem(agentImage);
  if (agentImageProblem) throw new DeployConfigError(`${CONTEXT_PREFIX}agentImage: ${agentImageProblem}`);

  const gracefulShutdownSeconds = int(
    "gracefulShutdownSeconds",
    lifecycleTimings().gracefulShutdownSeconds,
    1,
    600,
  );
  try {
    lifecycleTimings(gracefulShutdownSeconds);
  } catch (err) {
    throw new DeployConfigError(`${CONTEXT_PREFIX}gracefulShutdownSeconds: ${(err as Error).message}`);
  }

  const logRetentionDays = int("logRetentionDays", 30, 1, 3653);
  const auditLogRetentionDays = int("auditLogRetentionDays", 365, 1, 3653);
  for (const [key, days] of [
    ["logRetentionDays", logRetentionDays],
    ["auditLogRetentionDays", auditLogRetentionDays],
  ] as const) {
    if (!LOG_RETENTION_DAYS.includes(days)) {
      throw new DeployConfigError(
        `${CONTEXT_PREFIX}${key}: CloudWatch Logs keeps logs for one of ${LOG_RETENTION_DAYS.join(", ")} days`,
      );
    }
  }

  const alarmTopicArn = str("alarmTopicArn");
  if (alarmTopicArn !== null && !/^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[\w-]{1,256}$/.test(alarmTopicArn)) {
    throw new DeployConfigError(`${CONTEXT_PREFIX}alarmTopicArn: not an SNS topic ARN`);
  }

  const stackPrefix = str("stackPrefix") ?? "Kgw";
  if (!/^[A-Za-z][A-Za-z0-9-]{0,63}$/.test(stackPrefix)) {
    throw new DeployConfigError(
      `${CONTEXT_PREFIX}stackPrefix: letters, digits and -, starting with a letter`,
    );
  }

  return {
    stackPrefix,
    account,
    region,
    domainName,
    certificate,
    vpcId,
    natGateways: int("natGateways", 2, 1, 3),
    desiredCount,
    maxCount,
    taskCpu,
    taskMemoryMiB,
    image,
    agentImage,
    gracefulShutdownSeconds,
    connectionsPerTask: int("connectionsPerTask", 5000, 100, 1_000_000),
    cpuTargetPercent: int("cpuTargetPercent", 60, 10, 90),
    logRetentionDays,
    auditLogRetentionDays,
    alarmTopicArn,
    allowedCidrs: readCidrs(read("allowedCidrs")),
  };
}

/**
 * The published image of this version, which tenants' clusters can pull without credentials:
 * pinned by digest when the checkout holds the release's stamp. Not read when kgw:agentImage is
 * given (a mirror's reference, say): the stamp then decides nothing.
 */
function releasedAgentImage(stampText: string | null): string {
  try {
    return defaultKgwAgentImage(stampText === null ? null : parseReleaseStamp(stampText));
  } catch (err) {
    throw new DeployConfigError((err as Error).message);
  }
}

function readCertificate(
  zoneId: string | null,
  zoneName: string | null,
  certificateArn: string | null,
): InstallCertificateSource {
  if (certificateArn !== null) {
    if (zoneId !== null || zoneName !== null) {
      throw new DeployConfigError(
        `give ${CONTEXT_PREFIX}certificateArn or ${CONTEXT_PREFIX}hostedZoneId/${CONTEXT_PREFIX}hostedZoneName, not both`,
      );
    }
    if (!/^arn:aws[a-z-]*:acm:[a-z0-9-]+:\d{12}:certificate\/[0-9a-f-]{36}$/.test(certificateArn)) {
      throw new DeployConfigError(`${CONTEXT_PREFIX}certificateArn: not an ACM certificate ARN`);
    }
    return { kind: "certificate", certificateArn };
  }
  if (zoneId === null || zoneName === null) {
    throw new DeployConfigError(
      `the install URL needs a certificate: give ${CONTEXT_PREFIX}hostedZoneId and ${CONTEXT_PREFIX}hostedZoneName (a DNS-validated certificate and the alias record are created) or ${CONTEXT_PREFIX}certificateArn`,
    );
  }
  if (!/^Z[A-Z0-9]{1,31}$/.test(zoneId)) {
    throw new DeployConfigError(`${CONTEXT_PREFIX}hostedZoneId: "${zoneId}" is not a Route 53 zone id`);
  }
  return { kind: "hosted-zone", zoneId, zoneName: zoneName.replace(/\.$/, "") };
}

const IPV4_CIDR = /^(25[0-5]|2[0-4]\d|1?\d?\d)(\.(25[0-5]|2[0-4]\d|1?\d?\d)){3}\/([0-9]|[12]\d|3[0-2])$/;

function readCidrs(value: unknown): string[] {
  if (value === undefined || value === null || value === "") return ["0.0.0.0/0"];
  const list = Array.isArray(value) ? value : typeof value === "string" ? value.split(",") : null;
  if (!list || list.length === 0 || list.some((c) => typeof c !== "string")) {
    throw new DeployConfigError(
      `${CONTEXT_PREFIX}allowedCidrs: a list of IPv4 CIDRs (comma-separated on -c)`,
    );
  }
  const cidrs = (list as string[]).map((c) => c.trim());
  for (const c of cidrs) {
    if (!IPV4_CIDR.test(c))
      throw new DeployConfigError(`${CONTEXT_PREFIX}allowedCidrs: "${c}" is not an IPv4 CIDR`);
  }
  return cidrs;
}
