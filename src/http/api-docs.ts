import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import type { Env, Hono } from "hono";
import { PAGE_HEADERS } from "./response-headers.js";

/** The Swagger UI files `/docs` needs, served from this process: the page works offline. */
const ASSETS: Record<string, string> = {
  "swagger-ui.css": "text/css; charset=utf-8",
  "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
};
const assetDir = dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));
const cache = new Map<string, string>();

function asset(name: string): string {
  let content = cache.get(name);
  if (content === undefined) {
    content = readFileSync(join(assetDir, name), "utf8");
    cache.set(name, content);
  }
  return content;
}

function page(title: string): string {
  const safeTitle = title.replace(/[<>&"]/g, "");
  return `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>${safeTitle}</title>
  <link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
  <div id="reference"></div>
  <script src="/docs/assets/swagger-ui-bundle.js"></script>
  <script>
    window.ui = SwaggerUIBundle({ url: "/openapi.json", dom_id: "#reference", deepLinking: true, tryItOutEnabled: true });
  </script>
</body>
</html>`;
}

/** `GET /docs`: interactive reference (Swagger UI) of the document at `/openapi.json`. */
export function serveApiReference<E extends Env>(app: Hono<E>, title: string): void {
  app.get("/docs", (c) => c.html(page(title), 200, PAGE_HEADERS));
  app.get("/docs/assets/:file", (c) => {
    const name = c.req.param("file");
    const type = ASSETS[name];
    if (!type) return c.json({ error: "Not found" }, 404);
    return c.body(asset(name), 200, {
      ...PAGE_HEADERS,
      "Content-Type": type,
      "Cache-Control": "public, max-age=86400",
    });
  });
}
