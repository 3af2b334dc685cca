/**
 * A caller's credentials as files, for clients that read them from disk (curl, the Go client):
 * the CA bundle, the client certificate and its key, written once per set of credentials into
 * a directory the caller removes with its scenario. Private (0600): the key is a credential.
 */
import { writeFileSync } from "node:fs";
import path from "node:path";
import type { BenchPki } from "./pki.js";

export interface CallerFiles {
  ca: string;
  cert: string;
  key: string;
}

export class CallerFileCache {
  private readonly written = new Map<BenchPki, CallerFiles>();

  constructor(private readonly dir: string) {}

  filesFor(pki: BenchPki): CallerFiles {
    let files = this.written.get(pki);
    if (!files) {
      const n = this.written.size;
      const at = (name: string) => path.join(this.dir, `${name}-${n}.pem`);
      files = { ca: at("ca"), cert: at("cert"), key: at("key") };
      writeFileSync(files.ca, pki.caPem, { mode: 0o600 });
      writeFileSync(files.cert, pki.frontendCertPem, { mode: 0o600 });
      writeFileSync(files.key, pki.frontendKeyPem, { mode: 0o600 });
      this.written.set(pki, files);
    }
    return files;
  }
}
