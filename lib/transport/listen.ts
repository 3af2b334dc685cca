import { existsSync, unlinkSync } from "node:fs";
import type { AddressInfo, Server } from "node:net";
import { ConfigError } from "../errors.js";

/** Listens on TCP; resolves with the bound address (port 0 picks one, as tests do). */
export function listenTcp(server: Server, port: number, host: string): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error) =>
      reject(new ConfigError(`cannot listen on ${host || "*"}:${port}: ${err.message}`, { cause: err }));
    server.once("error", onError);
    server.listen({ port, host: host || undefined }, () => {
      server.off("error", onError);
      resolve(server.address() as AddressInfo);
    });
  });
}

/** Listens on a Unix socket; a stale file is removed only when the operator asked for it. */
export function listenUnix(server: Server, path: string, deleteExisting: boolean): Promise<string> {
  if (existsSync(path)) {
    if (!deleteExisting) {
      throw new ConfigError(`${path} already exists; remove it or pass --delete-existing-uds-file`);
    }
    unlinkSync(path);
  }
  return new Promise((resolve, reject) => {
    const onError = (err: Error) =>
      reject(new ConfigError(`cannot listen on ${path}: ${err.message}`, { cause: err }));
    server.once("error", onError);
    server.listen(path, () => {
      server.off("error", onError);
      resolve(path);
    });
  });
}

export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) {
      resolve();
      return;
    }
    server.close(() => resolve());
  });
}
