import { X509Certificate } from "node:crypto";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parsePkiCommand } from "../../lib/commands/pki/parse-pki-command.js";
import { runPkiCommand } from "../../lib/commands/pki/run-pki-command.js";
import { parseCaSecret } from "../../lib/deploy/secret-layout.js";
import { peerIdentityProblem } from "../../lib/fleet/peer/peer-identity.js";

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

async function pki(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const parsed = parsePkiCommand(argv, {});
  if (parsed.help) throw new Error("unexpected help");
  let out = "";
  let err = "";
  const code = await runPkiCommand(parsed.command, { out: (t) => (out += t), err: (t) => (err += t) });
  return { code, out, err };
}

describe("kgw pki: the certificates of a deployment", () => {
  it("makes a CA, a serving certificate and a peer certificate, with the secrets' JSON", async () => {
    const root = await mkdtemp(path.join(tmpdir(), "kgw-pki-"));
    dirs.push(root);
    const ca = path.join(root, "ca");
    const peerCa = path.join(root, "peer-ca");
    expect((await pki("ca", `--out=${ca}`)).code).toBe(0);
    expect((await pki("ca", "--peer", `--out=${peerCa}`)).code).toBe(0);
    const serving = await pki(
      "serving",
      `--ca-cert=${ca}/ca.pem`,
      `--ca-key=${ca}/ca-key.pem`,
      "--dns-names=gateway.example.com",
      `--out=${root}/tls`,
    );
    expect(serving).toMatchObject({ code: 0, err: "" });
    expect(
      (await pki("peer", `--ca-cert=${peerCa}/ca.pem`, `--ca-key=${peerCa}/ca-key.pem`, `--out=${root}/peer`))
        .code,
    ).toBe(0);

    // The CA secret reads back as the CA --ca-secret will use.
    const caSecret = parseCaSecret(await readFile(`${ca}/ca-secret.json`, "utf8"), "test");
    expect(caSecret.certificate).toBe(await readFile(`${ca}/ca.pem`, "utf8"));
    for (const f of [
      "ca/ca-key.pem",
      "ca/ca-secret.json",
      "tls/tls-key.pem",
      "tls/tls-secret.json",
      "peer/tls-secret.json",
    ]) {
      expect(((await stat(path.join(root, f))).mode & 0o777).toString(8), f).toBe("600");
    }

    const tls = JSON.parse(await readFile(`${root}/tls/tls-secret.json`, "utf8"));
    const leaf = new X509Certificate(tls.certificate);
    expect(leaf.subjectAltName).toBe("DNS:gateway.example.com");
    expect(leaf.verify(new X509Certificate(tls.caCertificate).publicKey)).toBe(true);
    expect(tls.caCertificate).toBe(caSecret.certificate);

    const peer = JSON.parse(await readFile(`${root}/peer/tls-secret.json`, "utf8"));
    const peerLeaf = new X509Certificate(peer.certificate);
    expect(peerIdentityProblem(peerLeaf.subjectAltName)).toBeNull();
    expect(peerLeaf.verify(new X509Certificate(peer.caCertificate).publicKey)).toBe(true);
    expect(peer.caCertificate).not.toBe(caSecret.certificate);
  });

  it.each([
    [["ca"], /--out is required/],
    [["serving", "--out=x", "--ca-cert=a", "--ca-key=b"], /--dns-names is required/],
    [["serving", "--out=x", "--dns-names=gw.example.com"], /needs the signing CA/],
    [["serving", "--out=x", "--ca-cert=a", "--ca-key=b", "--dns-names=10.0.0.1"], /use --ip-addresses/],
    [["peer", "--out=x", "--ca-cert=a", "--ca-key=b", "--dns-names=gw"], /does not apply to kgw pki peer/],
    [["ca", "--out=x", "--validity=1h"], /between 24h and 20 years/],
    [["rotate"], /unknown subcommand/],
  ])("refuses %j", (argv, message) => {
    expect(() => parsePkiCommand(argv, {})).toThrow(message);
  });

  it("says what is wrong with a signing CA that cannot be read", async () => {
    const r = await pki(
      "peer",
      "--out=/nonexistent/x",
      "--ca-cert=/nonexistent/ca.pem",
      "--ca-key=/nonexistent/k.pem",
    );
    expect(r.code).toBe(2);
    expect(r.err).toContain("--ca-cert: cannot read /nonexistent/ca.pem: ENOENT");
  });
});
