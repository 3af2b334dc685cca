import * as logs from "aws-cdk-lib/aws-logs";

/** The RetentionDays member for a number of days the config has already checked. */
export function retentionDays(days: number): logs.RetentionDays {
  const match = Object.values(logs.RetentionDays).find((v) => v === days);
  if (match === undefined) throw new RangeError(`CloudWatch Logs has no retention of ${days} days`);
  return match as logs.RetentionDays;
}
