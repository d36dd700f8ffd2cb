// `npm start` on a fresh clone, in development mode on the embedded database (issue 26): the first start
// says what it is doing while it creates the database and applies the migrations, instead of being silent
// for tens of seconds; a later start says it opens the database, and applies nothing.
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { startServerProcess, type ServerProcess } from "../support/server-process.js";

const root = new URL("../..", import.meta.url).pathname;
const dataDir = mkdtempSync(join(tmpdir(), "development-start-"));
const running: ServerProcess[] = [];
afterAll(async () => {
  await Promise.all(running.map((s) => s.kill()));
  rmSync(dataDir, { recursive: true, force: true });
});

/** The server as `npm start` runs it on a fresh clone: embedded database, no ISSUER_URL. */
async function start(env: Record<string, string> = {}): Promise<ServerProcess> {
  const server = await startServerProcess("", { DATA_DIR: dataDir, ISSUER_URL: "", ...env });
  running.push(server);
  return server;
}

async function stop(server: ServerProcess): Promise<void> {
  server.child.kill("SIGTERM");
  expect(await server.exited, server.logs()).toEqual({ code: 0, signal: null });
}

/** The messages of the JSON log lines, in order. */
function messages(server: ServerProcess): string[] {
  return server
    .logs()
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => (JSON.parse(l) as { msg: string }).msg);
}

const migrations = readdirSync(join(root, "drizzle")).filter((f) => f.endsWith(".sql")).length;

describe("npm start on the embedded database", () => {
  it("says it creates the database and applies the migrations on the first start, and only opens it later", async () => {
    const first = await start();
    const said = messages(first);
    const creating = said.findIndex((m) => m.startsWith("creating the embedded database (the first start takes a while"));
    const applying = said.indexOf(`applying ${migrations} database migrations`);
    const ready = said.indexOf("database ready");
    expect(creating, said.join("\n")).toBe(0);
    expect(applying).toBeGreaterThan(creating);
    expect(ready).toBeGreaterThan(applying);
    await stop(first);

    const second = await start();
    const again = messages(second);
    expect(again.indexOf("opening the embedded database"), again.join("\n")).toBe(0);
    expect(again.some((m) => m.startsWith("creating") || m.startsWith("applying"))).toBe(false);
    await stop(second);
  });
});
