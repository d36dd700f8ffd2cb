// `npm start` on a fresh clone, in development mode on the embedded database (issue 26): the first start
// says what it is doing while it creates the database and applies the migrations, instead of being silent
// for tens of seconds; a later start says it opens the database, and applies nothing. A start on another
// PORT keeps the issuer of the first (stored with the data): the same "local" organization, and the token
// printed before still works; a token of another issuer is refused naming both issuers.
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { call } from "../contract/harness.js";
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

/** A port nothing listens on now. */
async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
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
    const first = await start({ PORT: String(await freePort()) });
    const said = messages(first);
    const creating = said.findIndex((m) => m.startsWith("creating the embedded database (the first start takes a while"));
    const applying = said.indexOf(`applying ${migrations} database migrations`);
    const ready = said.indexOf("database ready");
    expect(creating, said.join("\n")).toBe(0);
    expect(applying).toBeGreaterThan(creating);
    expect(ready).toBeGreaterThan(applying);
    await stop(first);

    // Another port: the issuer stays the first start's.
    const second = await start({ PORT: String(await freePort()) });
    const again = messages(second);
    expect(again.indexOf("opening the embedded database"), again.join("\n")).toBe(0);
    expect(again.some((m) => m.startsWith("creating") || m.startsWith("applying"))).toBe(false);
    expect(second.port).not.toBe(first.port);
    expect(again).toContain(
      `development issuer http://localhost:${first.port} kept from the first start on this data although PORT is ${second.port}: ` +
        "the tokens and organization made before still work; set ISSUER_URL to choose another issuer",
    );
    expect(second.organization).toBe(first.organization);
    const groups = await call("connect-json", second.baseUrl, GroupsService.method.listGroups, {}, { authorization: `Bearer ${first.token}` });
    expect(groups.error).toBeUndefined();
    expect((groups.message as { groups: Array<{ uid: string; name: string }> }).groups).toEqual([expect.objectContaining({ uid: first.organization, name: "local" })]);
    const discovery = (await (await fetch(`${second.baseUrl}/.well-known/openid-configuration`)).json()) as { issuer: string };
    expect(discovery.issuer).toBe(`http://localhost:${first.port}`);
    await stop(second);

    // ISSUER_URL set: that issuer, and a token of the old one is refused with both issuers named.
    const third = await start({ ISSUER_URL: "http://127.0.0.1:9" });
    const refused = await call("connect-json", third.baseUrl, GroupsService.method.listGroups, {}, { authorization: `Bearer ${first.token}` });
    expect(refused.error?.code).toBe(16);
    expect(refused.error?.message).toContain(
      `not accepted for any identity (issuer "http://localhost:${first.port}"; this server's tokens have issuer "http://127.0.0.1:9")`,
    );
    await stop(third);
  });
});
