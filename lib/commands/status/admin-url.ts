/**
 * The admin address a command asks the status API at (`kgw status`, `kgw tenant show`): one
 * flag name, one environment variable, one check, so that both read the same address the same way.
 */
import { ConfigError } from "../../errors.js";

export const ADMIN_URL_FLAG = "admin-url";
export const ADMIN_URL_ENV = "KGW_ADMIN_URL";
/** The admin port's default (8133) on this machine: where `kgw status` looks unless told. */
export const DEFAULT_ADMIN_URL = "http://127.0.0.1:8133";

/** An http(s) URL with nothing but a host and port (and an optional "/"), without the slash. */
export function parseAdminUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(`--${ADMIN_URL_FLAG}: "${raw.slice(0, 80)}" is not a URL (http://host:8133)`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new ConfigError(`--${ADMIN_URL_FLAG}: must be http:// or https://`);
  }
  if (
    (url.pathname !== "/" && url.pathname !== "") ||
    url.search ||
    url.hash ||
    url.username ||
    url.password
  ) {
    throw new ConfigError(
      `--${ADMIN_URL_FLAG}: give the address only (http://host:8133), no path, query or user`,
    );
  }
  return `${url.protocol}//${url.host}`;
}
