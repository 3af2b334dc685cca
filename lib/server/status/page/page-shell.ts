/**
 * The frame every status page shares: the document, the header line (who answered, when, how
 * often the page reloads, the JSON it shows), the banner of a partial answer, and the response
 * headers. The page has no script at all: it reloads by `<meta http-equiv="refresh">`, so the
 * Content-Security-Policy can forbid every script, and a value that escaped escaping still could
 * not run.
 */
import type { HttpReply } from "../../../transport/http-endpoints.js";
import { STATUS_PAGE_REFRESH_SECONDS } from "../../durations.js";
import type { InstanceStatus } from "../status-model.js";
import { type Html, html } from "./html.js";
import { PAGE_STYLE, PAGE_STYLE_HASH } from "./page-style.js";

/**
 * Nothing is loaded, framed, submitted or scripted: the one stylesheet by its hash, and links
 * (same origin) to follow. frame-ancestors: no other page can frame this one to trick a click.
 */
export const PAGE_CSP = [
  "default-src 'none'",
  `style-src '${PAGE_STYLE_HASH}'`,
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

/** Every answer of the page's paths carries these (http-endpoints adds nosniff and no-store). */
export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy": PAGE_CSP,
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
};

export const HTML_TYPE = "text/html; charset=utf-8";

export interface PageFrame {
  title: string;
  /** The heading; `title` is the browser tab's. */
  heading: Html | string;
  answeredBy: string;
  generatedAt: string;
  instances: readonly InstanceStatus[];
  /** The JSON this page shows, linked from the header. */
  jsonPath: string;
  /** A link back to the fleet, on a tenant's page. */
  back?: boolean;
}

function partialBanner(instances: readonly InstanceStatus[]): Html | null {
  const missing = instances.filter((i) => !i.answered).map((i) => i.id);
  if (missing.length === 0) return null;
  return html`<p class="partial" id="partial">Partial answer: ${missing.join(", ")} did not answer; their agents and counts are missing below.</p>`;
}

export function pageDocument(frame: PageFrame, body: Html): string {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="refresh" content="${STATUS_PAGE_REFRESH_SECONDS}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>${frame.title}</title>
<style>${PAGE_STYLE}</style>
</head>
<body>
<header>
<h1>${frame.heading}</h1>
<p class="meta">Answered by <b>${frame.answeredBy}</b> at <time>${frame.generatedAt}</time>; reloads every ${STATUS_PAGE_REFRESH_SECONDS} s. ${frame.back && html`<a href="/ui">Fleet</a> · `}<a href="${frame.jsonPath}">JSON</a></p>
</header>
${partialBanner(frame.instances)}
${body}
</body>
</html>
`.text;
}

export function pageReply(status: number, frame: PageFrame, body: Html): HttpReply {
  return { status, body: pageDocument(frame, body), contentType: HTML_TYPE, headers: PAGE_HEADERS };
}
