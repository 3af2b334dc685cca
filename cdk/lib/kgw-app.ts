import { type App, Tags, Validations } from "aws-cdk-lib";
import { AwsSolutionsChecks } from "cdk-nag";
import type { DeployConfig } from "./deploy-config.js";
import { suppressReviewedFindings } from "./nag-suppressions.js";
import { ServiceStack } from "./service-stack.js";
import { StatefulStack } from "./stateful-stack.js";

export interface KgwStacks {
  stateful: StatefulStack;
  service: ServiceStack;
}

/**
 * The deployment: a stateful stack (table, secrets, audit log; all retained) and the service
 * stack that uses it. cdk-nag's AwsSolutions pack runs on both; every finding it does not pass
 * is suppressed in nag-suppressions.ts with its reason, and the tests fail on any other.
 */
export function buildKgwApp(app: App, config: DeployConfig): KgwStacks {
  const env =
    config.account !== undefined || config.region !== undefined
      ? { account: config.account, region: config.region }
      : undefined;
  const stateful = new StatefulStack(app, `${config.stackPrefix}-Stateful`, {
    env,
    description: "kgw gateway: registry table, secrets and audit log (retained)",
    auditLogRetentionDays: config.auditLogRetentionDays,
    terminationProtection: true,
  });
  const service = new ServiceStack(app, `${config.stackPrefix}-Service`, {
    env,
    description: "kgw gateway: Fargate service behind a Network Load Balancer",
    config,
    stateful,
  });
  service.addStackDependency(stateful);
  for (const stack of [stateful, service]) Tags.of(stack).add("kgw:deployment", config.stackPrefix);
  suppressReviewedFindings(stateful, "stateful");
  suppressReviewedFindings(service, "service");
  // A violation that is not acknowledged fails the synthesis, so `cdk synth` is the gate.
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app, { verbose: true }));
  return { stateful, service };
}
