import { readFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { readPem } from "../../lib/transport/tls-files.js";
import { startTestGateway } from "../helpers/gateway.js";
import { getTestPki } from "../helpers/pki.js";

const PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

describe("readPem", () => {
  it("reads a file, or the variable an env: source names", async () => {
    const pki = await getTestPki();
    expect(readPem(pki.files.caCert, "--ca-cert")).toEqual(readFileSync(pki.files.caCert));
    expect(readPem("env:KGW_TEST_PEM", "--ca-cert", { KGW_TEST_PEM: PEM }).toString()).toBe(PEM);
  });

  it("says which flag and which variable is missing or wrong, without echoing the value", () => {
    expect(() => readPem("env:KGW_NOPE", "--cluster-key", {})).toThrow(
      "--cluster-key: environment variable KGW_NOPE is empty or not set",
    );
    const secret = "not-a-pem-but-a-secret-0123456789";
    let message = "";
    try {
      readPem("env:KGW_BAD", "--cluster-key", { KGW_BAD: secret });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toBe("--cluster-key: environment variable KGW_BAD holds no PEM block");
    expect(() => readPem("/nonexistent/ca.pem", "--ca-cert")).toThrow(
      "--ca-cert: cannot read /nonexistent/ca.pem",
    );
  });
});

describe("a gateway given its certificate and key in the environment", () => {
  const names = ["KGW_TEST_SERVER_CERT", "KGW_TEST_SERVER_KEY"];
  afterEach(() => {
    for (const n of names) delete process.env[n];
  });

  it("serves TLS with them, as ECS hands a task its secrets", async () => {
    const pki = await getTestPki();
    const flags = ["--cluster-cert=env:KGW_TEST_SERVER_CERT", "--cluster-key=env:KGW_TEST_SERVER_KEY"];
    // Read from there and nowhere else: without the variables it does not start.
    await expect(startTestGateway(flags)).rejects.toThrow(
      "--cluster-cert: environment variable KGW_TEST_SERVER_CERT is empty or not set",
    );
    process.env.KGW_TEST_SERVER_CERT = readFileSync(pki.files.serverCert, "utf8");
    process.env.KGW_TEST_SERVER_KEY = readFileSync(pki.files.serverKey, "utf8");
    const t = await startTestGateway(flags);
    try {
      const { connect } = await import("node:tls");
      const peerCert = await new Promise<string>((resolve, reject) => {
        const s = connect(
          { host: "127.0.0.1", port: t.gw.addresses.agent.port, servername: "localhost", ca: pki.ca.certPem },
          () => {
            resolve(s.getPeerX509Certificate()?.toString() ?? "");
            s.destroy();
          },
        );
        s.on("error", reject);
      });
      expect(peerCert).toBe(
        new (await import("node:crypto")).X509Certificate(readFileSync(pki.files.serverCert)).toString(),
      );
    } finally {
      await t.gw.close();
    }
  });
});
