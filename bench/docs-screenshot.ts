// A screenshot of /docs as headless Chromium renders it (the way test/browser/docs.test.ts loads it), for the
// docs/api.md: a test server on a scratch database with two repos, a token pasted into Authorize, ListRepos tried.
//
//   npm run docs:screenshot [-- <out.png>]      (default docs/api-docs.png)
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { launchChromium } from "../test/support/browser.js";
import { startTestServer } from "../test/support/server.js";
import { seedWorld } from "../test/support/world.js";

const out = path.resolve(process.argv[2] ?? "docs/api-docs.png");
const server = await startTestServer();
const browser = await launchChromium({ width: 1280, height: 1000 });
try {
  const world = await seedWorld(server);
  for (const name of ["nginx", "python"]) {
    const res = await fetch(`${server.baseUrl}/registry/v2/repos/${world.org}`, {
      method: "POST",
      headers: { ...world.auth("owner"), "content-type": "application/json" },
      body: JSON.stringify({ name, description: `${name} images` }),
    });
    if (!res.ok) throw new Error(`CreateRepo ${name}: ${res.status} ${await res.text()}`);
  }
  const page = await browser.context.newPage();
  page.setDefaultTimeout(60_000);
  await page.goto(`${server.baseUrl}/docs`);
  await page.locator(".opblock").first().waitFor();

  await page.locator(".auth-wrapper button.authorize").click();
  const dialog = page.locator(".dialog-ux .modal-ux");
  await dialog.locator("input").first().fill(world.token.owner);
  await dialog.locator("button.authorize").click();
  await dialog.locator("button.btn-done").click();

  // Only the repos operations (the filter matches tags), once the list has been redrawn.
  await page.locator(".operation-filter-input").fill("ReposService");
  await page.locator(".opblock-tag-section").nth(1).waitFor({ state: "detached" });
  const listRepos = page.locator('[id="operations-ReposService-ListRepos"]');
  await listRepos.locator(".opblock-summary-control").click();
  await listRepos.locator("button.try-out__btn").click();
  await listRepos.locator('tr[data-param-name="uidp.childrenOf"] input').fill(world.org);
  await listRepos.locator("button.execute").click();
  await listRepos.locator(".live-responses-table .response-col_status").first().waitFor();
  // The picture shows "<token>" where the page shows the (short-lived, throwaway) token.
  await page.locator("body").evaluate((body, token) => {
    const walker = body.ownerDocument.createTreeWalker(body, 4 /* NodeFilter.SHOW_TEXT */);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (node.nodeValue?.includes(token)) node.nodeValue = node.nodeValue.replaceAll(token, "<token>");
    }
    body.ownerDocument.defaultView?.scrollTo(0, 0);
  }, world.token.owner);

  await mkdir(path.dirname(out), { recursive: true });
  const height = await page.locator("html").evaluate((html) => html.scrollHeight);
  await page.screenshot({ path: out, fullPage: true, clip: { x: 0, y: 0, width: 1280, height: Math.min(height, 2400) } });
  console.log(`wrote ${path.relative(process.cwd(), out)}`);
} finally {
  await browser.close();
  await server.close();
}
