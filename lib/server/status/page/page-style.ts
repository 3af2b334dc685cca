/**
 * The status page's only stylesheet, inline (no external asset: the admin port serves nothing
 * else), and its SHA-256, which the Content-Security-Policy names: the browser applies this one
 * stylesheet and no other, so even markup that got past escaping could neither style nor script.
 */
import { createHash } from "node:crypto";
import { html } from "./html.js";

/** Markup made by the template itself (no value interpolated): the text its hash is of. */
export const PAGE_STYLE = html`
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5rem; color: #1b1f24; background: #ffffff; }
h1 { font-size: 1.4rem; margin: 0 0 .25rem; }
h2 { font-size: 1.1rem; margin: 1.5rem 0 .5rem; }
p.meta { color: #57606a; margin: 0; }
p.partial { background: #ffebe9; border: 1px solid #cf222e; color: #82071e; padding: .5rem .75rem; }
table { border-collapse: collapse; }
th, td { text-align: left; padding: .3rem .7rem; border-bottom: 1px solid #d0d7de; vertical-align: top; }
th { background: #f6f8fa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
code, td.id { font-family: ui-monospace, monospace; }
tr.down { background: #ffebe9; }
tr.down td.state { color: #cf222e; font-weight: 600; }
tr.up td.state { color: #1a7f37; }
tr.draining td.state { color: #9a6700; }
dl { display: grid; grid-template-columns: max-content auto; gap: .2rem 1rem; }
dt { color: #57606a; }
dd { margin: 0; }
.none { color: #57606a; }
`;

/** For the policy's style-src: 'sha256-<base64>' of the exact text between the style tags. */
export const PAGE_STYLE_HASH = `sha256-${createHash("sha256").update(PAGE_STYLE.text).digest("base64")}`;
