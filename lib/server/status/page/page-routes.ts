/**
 * The status page on the admin port: `GET /ui`, the fleet (instances, then tenants);
 * `GET /ui/tenants/<id>`, one tenant (agents, dials, credentials, instances); `GET /` sends a
 * browser to `/ui`. Server-rendered HTML from the same reading as the JSON (status-reader.ts),
 * no script, no asset; every value escaped (html.ts). A path that names no tenant gets the JSON
 * route's 400 and message, as a page. JSON stays at /status: one URL, one type, for scripts and
 * caches alike.
 */
import type { HttpReply, HttpRequestInfo, Routes } from "../../../transport/http-endpoints.js";
import { BAD_TENANT_PATH, type StatusReader, tenantIdOfPath } from "../status-reader.js";
import { STATUS_PATH, TENANT_STATUS_PREFIX } from "../status-routes.js";
import { activitySection } from "./activity-section.js";
import { agentsSection } from "./agents-section.js";
import { credentialsSection } from "./credentials-section.js";
import { html } from "./html.js";
import { instancesSection } from "./instances-section.js";
import { HTML_TYPE, PAGE_HEADERS, pageReply } from "./page-shell.js";
import { tenantsSection } from "./tenants-section.js";

export const PAGE_PATH = "/ui";
export const TENANT_PAGE_PREFIX = "/ui/tenants/";

function badRequest(message: string): HttpReply {
  const body = html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>400 Bad Request</title></head>
<body><h1>400 Bad Request</h1><p><code>ERR_BAD_REQUEST</code>: ${message}</p><p><a href="${PAGE_PATH}">Fleet</a></p></body></html>
`;
  return { status: 400, body: body.text, contentType: HTML_TYPE, headers: PAGE_HEADERS };
}

export function statusPageRoutes(read: StatusReader): Routes {
  return {
    "/": () => ({ status: 303, body: `see ${PAGE_PATH}\n`, headers: { location: PAGE_PATH } }),
    [PAGE_PATH]: async () => {
      const s = await read.fleet();
      return pageReply(
        200,
        {
          title: `kgw fleet · ${s.answeredBy}`,
          heading: "kgw fleet status",
          answeredBy: s.answeredBy,
          generatedAt: s.generatedAt,
          instances: s.instances,
          jsonPath: STATUS_PATH,
        },
        html`${instancesSection(s.instances)}
${tenantsSection(s.tenants)}`,
      );
    },
    [TENANT_PAGE_PREFIX]: async ({ path }: HttpRequestInfo) => {
      const id = tenantIdOfPath(path, TENANT_PAGE_PREFIX);
      if (id === null) return badRequest(BAD_TENANT_PATH);
      const s = await read.tenant(id);
      return pageReply(
        200,
        {
          title: `kgw tenant ${id}`,
          heading: html`Tenant <code>${id}</code>`,
          answeredBy: s.answeredBy,
          generatedAt: s.generatedAt,
          instances: s.instances,
          jsonPath: `${TENANT_STATUS_PREFIX}${id}`,
          back: true,
        },
        html`${agentsSection(s.tenant.agents)}
${activitySection(s.tenant)}
${credentialsSection(s.tenant.credentials)}
${instancesSection(s.instances)}`,
      );
    },
  };
}
