/**
 * Tests that run the tenant CLI in-process against dynalite (createTableTenant) need the AWS
 * SDK's environment (endpoint, region, dummy credentials) in this process's own `process.env`,
 * which the next suite in the same worker must not inherit. One place sets it and puts back what
 * was there before, including "was not set".
 */
export function overrideProcessEnv(vars: Readonly<Record<string, string>>): () => void {
  const saved = new Map<string, string | undefined>();
  for (const [k, v] of Object.entries(vars)) {
    saved.set(k, process.env[k]);
    process.env[k] = v;
  }
  return () => {
    for (const [k, v] of saved) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  };
}
