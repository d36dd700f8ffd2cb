// /docs in a real browser (headless Chromium, the Debian package): Swagger UI loads from this server, lists the
// operations of /openapi.json, and "Try it out" calls the server, anonymously (Ping) and with a pasted bearer
// token (ListGroups, and GetGroup on a uid with a "/").
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Locator, Page } from "playwright-core";
import type { OpenApiDocument } from "../../src/gateway/openapi.js";
import { launchChromium, type Browser } from "../support/browser.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";

const TIMEOUT = 60_000;

let server: TestServer;
let world: World;
let browser: Browser;
let page: Page;
const problems: string[] = [];

beforeAll(async () => {
  browser = await launchChromium();
  server = await startTestServer();
  world = await seedWorld(server);
  page = await browser.context.newPage();
  page.setDefaultTimeout(TIMEOUT);
  // A script error or a refused load (a CSP violation, a missing file) would show here.
  page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
  page.on("console", (msg) => {
    if (msg.type() === "error") problems.push(`console: ${msg.text()}`);
  });
  page.on("requestfailed", (req) => problems.push(`request failed: ${req.url()}`));
  page.on("request", (req) => {
    if (!req.url().startsWith(server.baseUrl)) problems.push(`request outside the server: ${req.url()}`);
  });
});
afterAll(async () => {
  await browser?.close();
  await server?.close();
});

/** The operation's block: Swagger UI's id is operations-<tag>-<operationId>. */
function operation(tag: string, operationId: string): Locator {
  return page.locator(`[id="operations-${tag}-${operationId}"]`);
}

/** Opens the operation, presses "Try it out" (filling the path parameters) and "Execute"; returns the shown status. */
async function tryIt(block: Locator, params: Record<string, string> = {}): Promise<{ status: string; body: string }> {
  if (!(await block.locator(".opblock-body").isVisible())) await block.locator(".opblock-summary-control").click();
  const tryOut = block.locator("button.try-out__btn");
  if ((await tryOut.textContent())?.includes("Try it out")) await tryOut.click();
  for (const [name, value] of Object.entries(params)) {
    await block.locator(`tr[data-param-name="${name}"] input`).fill(value);
  }
  // An earlier answer of this operation is cleared first, so the status and body read are the new ones
  // (reading while Swagger UI replaced one answer with the next read a new status beside an old body).
  const clear = block.locator("button.btn-clear");
  if ((await clear.count()) > 0 && (await clear.isVisible())) {
    await clear.click();
    await block.locator(".live-responses-table").waitFor({ state: "detached", timeout: TIMEOUT });
  }
  await block.locator("button.execute").click();
  const status = block.locator(".live-responses-table .response .response-col_status").first();
  await status.waitFor();
  const body = await block.locator(".live-responses-table .response-col_description pre").first().textContent();
  return { status: (await status.textContent())?.trim() ?? "", body: body ?? "" };
}

describe("/docs in Chromium", () => {
  it("lists every operation of the OpenAPI document", async () => {
    await page.goto(`${server.baseUrl}/docs`);
    const doc = (await (await fetch(`${server.baseUrl}/openapi.json`)).json()) as OpenApiDocument;
    const ids = Object.values(doc.paths).flatMap((item) => Object.values(item).map((op) => `operations-${op.tags[0]}-${op.operationId}`));
    await page.locator(".opblock").first().waitFor();
    await expect.poll(() => page.locator(".opblock").count(), { timeout: TIMEOUT }).toBe(ids.length);
    const shown = await page.locator(".opblock").evaluateAll((els) => els.map((e) => e.id));
    expect(new Set(shown)).toEqual(new Set(ids));
    await expect.poll(() => operation("PingService", "Ping").locator(".opblock-summary-path").textContent()).toBe("/ping/v2/ping");
    expect(await operation("ReposService", "ListRepos").locator(".opblock-summary-path").textContent()).toBe("/registry/v2/repos");
    expect(problems).toEqual([]);
  });

  it("tries Ping, which needs no token", async () => {
    const res = await tryIt(operation("PingService", "Ping"));
    expect(res.status).toBe("200");
    expect(JSON.parse(res.body)).toEqual({ response: "pong" });
  });

  it("tries ListGroups: 401 without a token, 200 with the token pasted into Authorize", async () => {
    const listGroups = operation("GroupsService", "ListGroups");
    expect((await tryIt(listGroups)).status).toBe("401");

    await page.locator(".auth-wrapper button.authorize").click();
    const dialog = page.locator(".dialog-ux .modal-ux");
    await dialog.locator("input").first().fill(world.token.owner);
    await dialog.locator("button.authorize").click();
    await dialog.locator("button.btn-done").click();

    const res = await tryIt(listGroups);
    expect(res.status).toBe("200");
    const names = (JSON.parse(res.body) as { groups: Array<{ uid: string; name: string }> }).groups.map((g) => g.uid);
    expect(names).toContain(world.org);
  });

  it("tries GetGroup on a uid containing a slash", async () => {
    const res = await tryIt(operation("GroupsService", "GetGroup"), { uid: world.team });
    expect(res.status).toBe("200");
    expect(JSON.parse(res.body)).toMatchObject({ uid: world.team, name: "team" });
  });

  it("keeps the token across a reload (persistAuthorization)", async () => {
    await page.reload();
    const res = await tryIt(operation("GroupsService", "ListGroups"));
    expect(res.status).toBe("200");
    // The one 401 is the call made without a token, on purpose.
    expect(problems.filter((p) => !p.includes("status of 401"))).toEqual([]);
  });
});
