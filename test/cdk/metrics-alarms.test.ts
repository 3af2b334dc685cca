import { Template } from "aws-cdk-lib/assertions";
import { beforeAll, describe, expect, it } from "vitest";
import { gatewayCommand } from "../../cdk/lib/gateway-command.js";
import { parseServerOptions } from "../../lib/config/server-options.js";
import { DEFAULT_EMF_NAMESPACE } from "../../lib/metrics/emf/emf-catalog.js";
import { EmfPublisher } from "../../lib/metrics/emf/emf-publisher.js";
import { FleetMetrics } from "../../lib/metrics/fleet-metrics.js";
import { ServerMetrics } from "../../lib/metrics/server-metrics.js";
import { silentLogger } from "../../lib/observability/logger.js";
import { DIAL_OUTCOMES } from "../../lib/server/audit/audit-record.js";
import { synthStacks } from "./fixtures.js";

const stacks = synthStacks({ alarmTopicArn: "arn:aws:sns:eu-west-1:123456789012:oncall" });
const template = Template.fromStack(stacks.service);
const tableRef = Object.keys(Template.fromStack(stacks.stateful).toJSON().Resources).find((k) =>
  k.startsWith("RegistryTable"),
)!;

/** "name [dimension keys]": a metric as CloudWatch identifies it, within our namespace. */
const key = (name: string, dims: string[]) => `${name} [${[...dims].sort().join(",")}]`;

/**
 * Every metric the gateway writes, read off the documents a publisher writes from a registry in
 * which every source series has counted: what CloudWatch will have.
 */
let emitted: Set<string>;
beforeAll(async () => {
  const m = new ServerMetrics();
  const fleet = new FleetMetrics(m);
  for (const outcome of DIAL_OUTCOMES) m.tenantDials.inc({ tenant: "t", outcome });
  m.peerDials.inc({ outcome: "established" });
  m.quotaRefusals.inc({ quota: "maxTunnels" });
  m.egressRefusals.inc({ rule: "no_rule" });
  m.rejectedConnections.inc({ listener: "agent", reason: "ERR_UNAUTHENTICATED" });
  m.auditDroppedRecords.inc();
  m.tunnelBytes.add(m.bytesToAgent, 10);
  fleet.registryErrors.inc({ call: "heartbeat" });
  fleet.leaseHeld.set(1);
  const lines: string[] = [];
  await new EmfPublisher({ namespace: DEFAULT_EMF_NAMESPACE, fleet: "t", instance: "i" }, 60_000, {
    registry: m.registry,
    write: (l) => lines.push(l),
    now: Date.now,
    schedule: () => ({ cancel: () => {} }),
    log: silentLogger(),
    onError: () => {},
  }).publish();
  emitted = new Set();
  for (const line of lines) {
    for (const d of JSON.parse(line)._aws.CloudWatchMetrics) {
      expect(d.Namespace).toBe(DEFAULT_EMF_NAMESPACE);
      for (const dims of d.Dimensions) for (const metric of d.Metrics) emitted.add(key(metric.Name, dims));
    }
  }
});

type Alarm = { Properties: Record<string, unknown> };
const alarms = template.findResources("AWS::CloudWatch::Alarm") as Record<string, Alarm>;
const alarm = (name: string): Record<string, unknown> =>
  Object.entries(alarms).find(([id]) => id.startsWith(`Alarms${name}`))![1].Properties;

type MetricQuery = {
  Expression?: string;
  MetricStat?: {
    Metric: { Namespace: string; MetricName: string; Dimensions: { Name: string; Value: unknown }[] };
    Stat: string;
    Period: number;
  };
};

/** The kgw metrics an alarm reads, with their statistic and period. */
function kgwMetricsOf(
  props: Record<string, unknown>,
): { key: string; stat: string; period: number; fleet: unknown }[] {
  const single =
    props.Namespace === undefined
      ? []
      : [
          {
            Metric: {
              Namespace: props.Namespace as string,
              MetricName: props.MetricName as string,
              Dimensions: props.Dimensions as { Name: string; Value: unknown }[],
            },
            Stat: props.Statistic as string,
            Period: props.Period as number,
          },
        ];
  const stats = [
    ...single,
    ...((props.Metrics as MetricQuery[] | undefined) ?? []).flatMap((q) => q.MetricStat ?? []),
  ];
  return stats
    .filter((s) => s.Metric.Namespace === DEFAULT_EMF_NAMESPACE)
    .map((s) => ({
      key: key(
        s.Metric.MetricName,
        s.Metric.Dimensions.map((d) => d.Name),
      ),
      stat: s.Stat,
      period: s.Period,
      fleet: s.Metric.Dimensions.find((d) => d.Name === "Fleet")?.Value,
    }));
}

describe("the gateway's metrics in the deployment", () => {
  it("are turned on in the task's command, every 60 s, named after the registry table", () => {
    const command = gatewayCommand({
      tableName: "Kgw-Stateful-RegistryTable-ABC",
      domainName: "gateway.example.com",
      gracefulShutdownSeconds: 20,
      agentImage: "ghcr.io/konnectivity-gateway/kgw:0.1.0",
    });
    expect(command).toContain("--metrics-emf-interval=60s");
    const parsed = parseServerOptions(command.slice(1), {});
    if (parsed.help) throw new Error("help");
    expect(parsed.options.metricsEmf).toEqual({
      intervalMs: 60_000,
      namespace: DEFAULT_EMF_NAMESPACE,
      fleet: "Kgw-Stateful-RegistryTable-ABC",
    });
  });

  it("reach a log group of their own, kept a week", () => {
    const groups = template.findResources("AWS::Logs::LogGroup");
    const metrics = Object.entries(groups).find(([id]) => id.startsWith("MetricsLog"))!;
    expect(metrics[1].Properties.RetentionInDays).toBe(7);
  });
});

describe("the alarms", () => {
  it("read only metrics the gateway writes, fleet-wide, on the registry table's fleet", () => {
    const read = Object.values(alarms).flatMap((a) => kgwMetricsOf(a.Properties));
    expect(read.length).toBeGreaterThan(0);
    for (const r of read) {
      expect(emitted).toContain(r.key);
      expect(r.key).toMatch(/\[Fleet\]$/);
      expect(JSON.stringify(r.fleet)).toContain(tableRef);
    }
  });

  it("no longer count dials with log metric filters", () => {
    template.resourceCountIs("AWS::Logs::MetricFilter", 0);
  });

  it("dial failures: over 5% failed of at least 20 dials, in 3 consecutive 5-minute periods", () => {
    const a = alarm("DialFailures");
    expect(kgwMetricsOf(a).map(({ key, stat, period }) => ({ key, stat, period }))).toEqual([
      { key: "Dials [Fleet]", stat: "Sum", period: 300 },
      { key: "FailedDials [Fleet]", stat: "Sum", period: 300 },
    ]);
    expect((a.Metrics as MetricQuery[]).find((q) => q.Expression)!.Expression).toBe(
      "IF(dials >= 20, 100 * failed / dials, 0)",
    );
    expect(a).toMatchObject({
      Threshold: 5,
      ComparisonOperator: "GreaterThanThreshold",
      EvaluationPeriods: 3,
      DatapointsToAlarm: 3,
      TreatMissingData: "notBreaching",
    });
  });

  it.each([
    [
      "RegistryErrors",
      "RegistryErrors [Fleet]",
      "Sum",
      60,
      1,
      "GreaterThanOrEqualToThreshold",
      5,
      "notBreaching",
    ],
    ["LeaseNotHeld", "LeaseHeld [Fleet]", "Minimum", 60, 1, "LessThanThreshold", 5, "notBreaching"],
    [
      "AuditRecordsDropped",
      "AuditRecordsDropped [Fleet]",
      "Sum",
      300,
      1,
      "GreaterThanOrEqualToThreshold",
      1,
      "notBreaching",
    ],
    // No metrics at all is itself the alarm: missing data breaches.
    ["MetricsMissing", "Dials [Fleet]", "SampleCount", 60, 1, "LessThanThreshold", 5, "breaching"],
  ])(
    "%s: %s, %s over %is, threshold %i",
    (name, metricKey, stat, period, threshold, operator, periods, missing) => {
      const a = alarm(name);
      expect(kgwMetricsOf(a)).toEqual([expect.objectContaining({ key: metricKey, stat, period })]);
      expect(a).toMatchObject({
        Threshold: threshold,
        ComparisonOperator: operator,
        EvaluationPeriods: periods,
        DatapointsToAlarm: periods,
        TreatMissingData: missing,
      });
    },
  );

  it("reports documents CloudWatch rejects from the metrics log group", () => {
    const a = alarm("MetricsRejected");
    const stats = (a.Metrics as MetricQuery[]).flatMap((q) => q.MetricStat ?? []);
    expect(stats.map((s) => `${s.Metric.Namespace}/${s.Metric.MetricName}`).sort()).toEqual([
      "AWS/Logs/EMFParsingErrors",
      "AWS/Logs/EMFValidationErrors",
    ]);
    for (const s of stats) {
      expect(s.Metric.Dimensions).toEqual([
        { Name: "LogGroupName", Value: { Ref: expect.stringMatching(/^MetricsLog/) } },
      ]);
    }
  });

  it("keep the load balancer's and DynamoDB's own, and all notify the topic", () => {
    const ids = Object.keys(alarms).map((id) => id.replace(/^Alarms/, "").replace(/[0-9A-F]{8}$/, ""));
    expect(ids.sort()).toEqual(
      [
        "AuditRecordsDropped",
        "DialFailures",
        "GatewayUnhealthyHosts",
        "InstallUnhealthyHosts",
        "LeaseNotHeld",
        "MetricsMissing",
        "MetricsRejected",
        "RegistryErrors",
        "RegistryThrottling",
        "TooFewHealthyTasks",
      ].sort(),
    );
    for (const a of Object.values(alarms)) {
      expect(a.Properties.AlarmActions).toEqual(["arn:aws:sns:eu-west-1:123456789012:oncall"]);
      expect(a.Properties.OKActions).toEqual(["arn:aws:sns:eu-west-1:123456789012:oncall"]);
    }
  });
});

/** The dashboard's JSON, its tokens (the table, the load balancer, the alarms) left as markers. */
function dashboardBody(): { widgets: { type: string; properties: Record<string, unknown> }[] } {
  const [dashboard] = Object.values(template.findResources("AWS::CloudWatch::Dashboard"));
  const body = dashboard!.Properties.DashboardBody as { "Fn::Join": [string, unknown[]] };
  const text = body["Fn::Join"][1]
    .map((part) => (typeof part === "string" ? part : `<${JSON.stringify(part).replace(/"/g, "'")}>`))
    .join("");
  return JSON.parse(text);
}

describe("the dashboard", () => {
  const body = dashboardBody();
  /** Every kgw metric a widget shows: plain metrics and the SEARCH expressions' schemas. */
  const shown = body.widgets.flatMap((w) =>
    ((w.properties.metrics as unknown[][] | undefined) ?? []).flatMap((entry) => {
      const first = entry[0];
      if (typeof first === "object" && first !== null && "expression" in first) {
        const expression = String((first as { expression: string }).expression);
        const search = /SEARCH\('\{([^}]*)\} MetricName="([^"]+)"/.exec(expression);
        if (!search) return [];
        const [namespace, ...dims] = search[1]!.split(",").map((s) => s.replace(/"/g, ""));
        return namespace === DEFAULT_EMF_NAMESPACE
          ? [{ widget: String(w.properties.title), key: key(search[2]!, dims) }]
          : [];
      }
      if (first !== DEFAULT_EMF_NAMESPACE) return [];
      // [namespace, name, dimension, value, dimension, value, ..., options]
      const dims: string[] = [];
      for (let i = 2; i + 1 < entry.length && typeof entry[i] === "string"; i += 2)
        dims.push(entry[i] as string);
      return [{ widget: String(w.properties.title), key: key(String(entry[1]), dims) }];
    }),
  );

  it("shows only metrics the gateway writes, under the dimensions it writes them", () => {
    expect(shown.length).toBeGreaterThan(8);
    for (const s of shown) expect(emitted, s.widget).toContain(s.key);
  });

  it("shows dials by outcome, refusals by reason, agents, tunnels, the peer hop, registry errors, per instance", () => {
    const keys = new Set(shown.map((s) => s.key));
    for (const k of [
      "Dials [Fleet,Outcome]",
      "Refusals [Fleet,Reason]",
      "Agents [Fleet,Instance]",
      "Tunnels [Fleet,Instance]",
      "Dials [Fleet,Instance]",
      "PeerDials [Fleet]",
      "Dials [Fleet]",
      "RegistryErrors [Fleet,Instance]",
      "LeaseHeld [Fleet]",
    ]) {
      expect(keys).toContain(k);
    }
    expect(JSON.stringify(body)).toContain(tableRef);
  });

  it("opens with the state of every alarm", () => {
    const status = body.widgets.find((w) => w.type === "alarm")!;
    expect((status.properties.alarms as unknown[]).length).toBe(Object.keys(alarms).length);
  });
});
