// The registry token endpoint's reads (src/registry/oci/auth.ts): a scope whose organization is written as its
// uid, asked by a caller holding every asked action's capabilities there, is granted without reading the repo
// (what is held on the organization is held on each of its repos); a scope the caller does not hold that way,
// or whose organization is written by name, is resolved in the database as before. Every statement the server
// sends during each token request is captured by a database logger.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";

let server: TestServer;
let world: World;
let capturing = false;
let captured: string[] = [];
const logger = {
  logQuery(query: string) {
    if (capturing) captured.push(query);
  },
};

beforeAll(async () => {
  server = await startTestServer({ databaseLogger: logger });
  world = await seedWorld(server);
}, 120_000);

afterAll(async () => {
  await server?.close();
});

/** A token for `scope` as `token`'s caller: the actions granted, and the statements sent meanwhile. */
async function tokenFor(token: string, scope: string): Promise<{ actions: string[]; statements: string[] }> {
  const ask = () =>
    fetch(`${server.baseUrl}/token?scope=${encodeURIComponent(scope)}`, { headers: { authorization: `Basic ${Buffer.from(`_token:${token}`).toString("base64")}` } });
  await (await ask()).arrayBuffer(); // the caller's grants read, so that only the scope's reads are left
  captured = [];
  capturing = true;
  let res: Response;
  try {
    res = await ask();
  } finally {
    capturing = false;
  }
  const body = (await res.json()) as { token: string };
  expect(res.status).toBe(200);
  const claims = JSON.parse(Buffer.from(body.token.split(".")[1]!, "base64url").toString()) as { access: Array<{ actions: string[] }> };
  return { actions: claims.access[0]!.actions, statements: captured };
}

const readsRepos = (statements: string[]) => statements.filter((s) => s.includes('"repos"'));

describe("the registry token endpoint", () => {
  it("grants an owner push and pull on a repo of an organization written as its uid without reading the repo", async () => {
    const { actions, statements } = await tokenFor(world.token.owner, `repository:${world.org}/token-reads:pull,push`);
    expect(actions).toEqual(["pull", "push"]);
    expect(readsRepos(statements)).toEqual([]);
  });

  it("resolves the name when the caller does not hold every asked action on the organization", async () => {
    const { actions, statements } = await tokenFor(world.token.viewer, `repository:${world.org}/token-reads:pull,push`);
    expect(actions).toEqual(["pull"]);
    expect(readsRepos(statements).length).toBeGreaterThan(0);
  });

  it("resolves the name when its organization is written by name", async () => {
    const { actions, statements } = await tokenFor(world.token.owner, "repository:acme/token-reads:pull,push");
    expect(actions).toEqual(["pull", "push"]);
    expect(readsRepos(statements).length).toBeGreaterThan(0);
  });
});
