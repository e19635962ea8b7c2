// make docs-check: headless Chromium loads /docs from a real server with the network off (every
// request not to the server's own origin is aborted and recorded; any is a failure), and
// Swagger UI must render one `.opblock` per operation of /openapi.json. Screenshot:
// target/docs.png (or DOCS_SCREENSHOT).
//
//   RAPTOR_URL=http://127.0.0.1:PORT node scripts/docs-check.mjs
import { chromium } from "playwright-core";

const base = process.env.RAPTOR_URL;
if (!base) throw new Error("RAPTOR_URL is required");
const origin = new URL(base).origin;
const executablePath = process.env.CHROMIUM ?? "/usr/bin/chromium";
const screenshot = process.env.DOCS_SCREENSHOT ?? "target/docs.png";

const spec = await (await fetch(`${base}/openapi.json`)).json();
const methods = new Set(["get", "put", "post", "delete", "patch", "head", "options", "trace"]);
const operations = Object.values(spec.paths).flatMap((item) =>
  Object.keys(item).filter((m) => methods.has(m)),
).length;

const browser = await chromium.launch({ executablePath, headless: true });
const failures = [];
try {
  const context = await browser.newContext({ serviceWorkers: "block", viewport: { width: 1280, height: 900 } });
  const blocked = [];
  const served = [];
  await context.route("**/*", async (route) => {
    const url = route.request().url();
    if (new URL(url).origin === origin) {
      served.push(url);
      await route.continue();
    } else {
      blocked.push(url);
      await route.abort("blockedbyclient");
    }
  });
  const page = await context.newPage();
  page.on("websocket", (ws) => blocked.push(ws.url()));
  page.on("pageerror", (error) => failures.push(`page error: ${error.message}`));
  page.on("response", (response) => {
    if (response.status() >= 400) failures.push(`${response.status()} ${response.url()}`);
  });

  const response = await page.goto(`${base}/docs`, { waitUntil: "networkidle" });
  if (response?.status() !== 200) failures.push(`/docs answered ${response?.status()}`);
  let rendered = 0;
  try {
    await page.waitForFunction((n) => document.querySelectorAll(".opblock").length >= n, operations, {
      timeout: 30_000,
    });
  } catch {
    failures.push("Swagger UI did not render every operation within 30 s (are its assets installed?)");
  }
  rendered = await page.locator(".opblock").count();
  if (rendered !== operations) {
    failures.push(`${rendered} operations rendered, /openapi.json has ${operations}`);
  }
  const errorsShown = await page.locator(".errors-wrapper").count();
  if (errorsShown > 0) {
    failures.push(`Swagger UI shows errors: ${(await page.locator(".errors-wrapper").innerText()).slice(0, 500)}`);
  }
  await page.screenshot({ path: screenshot, fullPage: true });
  for (const url of blocked) failures.push(`a request left the server's origin: ${url}`);
  console.log(
    `docs-check: ${rendered}/${operations} operations rendered; ${served.length} requests to ${origin}, ` +
      `${blocked.length} elsewhere (blocked); screenshot ${screenshot}`,
  );
} finally {
  await browser.close();
}
if (failures.length > 0) {
  for (const failure of failures) console.error(`docs-check: FAILED: ${failure}`);
  process.exit(1);
}
