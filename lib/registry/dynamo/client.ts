/**
 * The DynamoDB client of the registry and the tenant store, from the SDK's standard
 * configuration: region, endpoint (`AWS_ENDPOINT_URL_DYNAMODB`, `AWS_ENDPOINT_URL`), credentials
 * (environment, profile, container role) and `AWS_MAX_ATTEMPTS` all work without code; options
 * given here override them (tests point at dynalite this way). Nothing here signs or sends HTTP.
 *
 * What we add is bounded time: a connect timeout and a request timeout that fails the attempt
 * (the SDK's default only logs a warning), so an unreachable table fails within about
 * attempts × request timeout instead of hanging. Retries are the SDK's standard strategy:
 * throttling (ThrottlingException, ProvisionedThroughputExceededException, HTTP 429) and
 * transient errors (timeouts, ECONNREFUSED/ECONNRESET, 5xx) are retried with exponential backoff
 * and full jitter (delay uniform in [0, base·2^attempt], base 1 s for throttling, 50 ms
 * otherwise, capped at 20 s), behind a client-wide retry quota that stops retry storms.
 * test/unit/registry-dynamo.test.ts checks both.
 *
 * Built without the SDK's Node.js version warning, which it prints below Node.js 22 only
 * (lib/util/aws-sdk-node-warning.ts).
 */
import { DynamoDBClient, type DynamoDBClientConfig } from "@aws-sdk/client-dynamodb";
import { withoutNodeVersionWarning } from "../../util/aws-sdk-node-warning.js";
import { DYNAMO_CONNECT_TIMEOUT_MS, DYNAMO_REQUEST_TIMEOUT_MS } from "../durations.js";

export interface DynamoClientOptions {
  /** Default: the SDK's (AWS_REGION, profile). */
  region?: string;
  /** Default: the SDK's (AWS_ENDPOINT_URL_DYNAMODB, then the regional endpoint). */
  endpoint?: string;
  /** Default: the SDK's credential chain. */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  connectTimeoutMs?: number;
  requestTimeoutMs?: number;
  /** Attempts per request, retries included. Default: the SDK's (AWS_MAX_ATTEMPTS, else 4). */
  maxAttempts?: number;
}

export function createDynamoClient(options: DynamoClientOptions = {}): DynamoDBClient {
  const config: DynamoDBClientConfig = {
    requestHandler: {
      connectionTimeout: options.connectTimeoutMs ?? DYNAMO_CONNECT_TIMEOUT_MS,
      requestTimeout: options.requestTimeoutMs ?? DYNAMO_REQUEST_TIMEOUT_MS,
      throwOnRequestTimeout: true,
    },
    retryMode: "standard",
  };
  // Only what was given: an explicit undefined would hide the SDK's own configuration.
  if (options.region !== undefined) config.region = options.region;
  if (options.endpoint !== undefined) config.endpoint = options.endpoint;
  if (options.credentials !== undefined) config.credentials = options.credentials;
  if (options.maxAttempts !== undefined) config.maxAttempts = options.maxAttempts;
  return withoutNodeVersionWarning(() => new DynamoDBClient(config));
}
