/**
 * What the benchmark's processes need to reach its local DynamoDB (dynalite-main.ts) through the
 * AWS SDK's standard configuration, as a deployment's processes reach the real one.
 */
export const BENCH_REGION = "us-east-1";
export const BENCH_CREDENTIALS = { accessKeyId: "kgw-bench", secretAccessKey: "kgw-bench" };

/** The environment of a child process that talks to the DynamoDB at `port`. */
export function localAwsEnv(port: number): Record<string, string> {
  return {
    AWS_ENDPOINT_URL_DYNAMODB: `http://127.0.0.1:${port}`,
    AWS_REGION: BENCH_REGION,
    AWS_ACCESS_KEY_ID: BENCH_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: BENCH_CREDENTIALS.secretAccessKey,
    // The SDK's notice that its 2027 releases need Node.js 22 (docs/REGISTRY.md).
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true",
  };
}
