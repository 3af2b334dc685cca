/** Reading a server's Prometheus metrics from its admin port, for scenarios that count things. */
import { get } from "node:http";
import { LOOPBACK } from "./ports.js";

/** The text of `/metrics` on `port` (an admin port on loopback). */
export function scrape(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = get({ host: LOOPBACK, port, path: "/metrics", agent: false, timeout: 5000 }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => {
        body += d;
      });
      res.on("end", () =>
        res.statusCode === 200 ? resolve(body) : reject(new Error(`/metrics answered ${res.statusCode}`)),
      );
    });
    req.on("timeout", () => req.destroy(new Error("/metrics: timeout")));
    req.on("error", reject);
  });
}

/** The sum of the samples of `name` whose labels include `label` (0 when there are none). */
export function metric(text: string, name: string, label: string): number {
  let sum = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`) || !line.includes(label)) continue;
    sum += Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return sum;
}
