// The server behind a real PgBouncer in transaction mode (DATABASE_POOL_MODE=transaction): each transaction,
// or each statement outside one, may run on another of PgBouncer's server connections, so the server names
// no statement, sends no startup parameter, and LISTENs (grants, keys, events) and migrates over the direct
// DATABASE_LISTEN_URL. Shown with calls that use the kernel's named (hot) statements, pages through the
// prepared lists, and an event delivered to a sink. Without the setting, the server refuses to start with a
// line naming it (PgBouncer refuses the statement_timeout startup parameter).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { subscriptions } from "../../src/db/schema/index.js";
import { newChildUid } from "../../src/kernel/uidp.js";
import { ReposService } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { call, type Protocol } from "../contract/harness.js";
import { pgbouncerMissing, startPgbouncer, type Pgbouncer } from "../support/pgbouncer.js";
import { createScratchDatabase, openDirect, startServerProcess, type DirectAccess, type ScratchDatabase, type ServerProcess } from "../support/server-process.js";
import { startSink, type TestSink } from "../support/sink.js";

const missing = pgbouncerMissing();
if (missing) console.info(`pooler tests skipped: ${missing}`);

/** The application_name of the direct connection, to tell it from PgBouncer's server connections. */
const LISTEN_APP = "apiserver-direct";

describe.skipIf(missing !== undefined)("behind PgBouncer in transaction mode (PostgreSQL)", () => {
  let bouncer: Pgbouncer;
  let scratch: ScratchDatabase;
  let direct: DirectAccess | undefined;
  let sink: TestSink | undefined;
  const servers: ServerProcess[] = [];
  const scratches: ScratchDatabase[] = [];

  beforeAll(async () => {
    // The server's statement_timeout and jit, set by the pooler on each server connection it opens.
    bouncer = await startPgbouncer({ poolMode: "transaction", poolSize: 2, connectQuery: "SET statement_timeout = 10000; SET jit = off" });
    scratch = await createScratchDatabase();
    scratches.push(scratch);
  });
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.kill()));
    await sink?.close();
    await direct?.close();
    await bouncer?.stop();
    for (const s of scratches) await s.dispose();
  });

  it("serves reads, pages and writes through the pooler, listens and migrates over the direct URL, delivers events", async () => {
    const listenUrl = new URL(scratch.url);
    listenUrl.searchParams.set("application_name", LISTEN_APP);
    const server = await startServerProcess(bouncer.via(scratch.url), {
      DATABASE_POOL_MODE: "transaction",
      DATABASE_LISTEN_URL: listenUrl.toString(),
      EVENTS_RETRY_BASE_MS: "50",
    });
    servers.push(server);
    // The pooler's server connections carry statement_timeout and jit: the server does not warn.
    expect(server.logs()).not.toMatch(/cannot set these on its connections/);

    direct = await openDirect(scratch.url);
    sink = await startSink();
    await direct.db.insert(subscriptions).values({ uid: newChildUid(server.organization), groupUid: server.organization, sink: sink.url });

    const auth = { authorization: `Bearer ${server.token}` };
    const created = await call("rest", server.baseUrl, ReposService.method.createRepo, { parent: server.organization, repo: { name: "through-pgbouncer" } }, auth);
    expect(created.error).toBeUndefined();
    const uid = created.message!.uid;
    for (let i = 0; i < 5; i++) {
      const group = await call("grpc", server.baseUrl, GroupsService.method.createGroup, { parent: server.organization, group: { name: `g${i}` } }, auth);
      expect(group.error).toBeUndefined();
    }

    // Many calls at once over few server connections: every hot statement (GetRepo's find, the grants of
    // authentication, the prepared list pages) runs on whichever connection PgBouncer hands out.
    const protocols: Protocol[] = ["grpc", "rest", "connect-json"];
    const failures: string[] = [];
    await Promise.all(
      Array.from({ length: 8 }, async (_, w) => {
        for (let i = 0; i < 15; i++) {
          const protocol = protocols[(w + i) % protocols.length]!;
          const got = await call(protocol, server.baseUrl, ReposService.method.getRepo, { uid }, auth);
          if (got.error || got.message?.name !== "through-pgbouncer") failures.push(`GetRepo ${protocol}: ${String(got.error)}`);
          const groups = await call(protocol, server.baseUrl, GroupsService.method.listGroups, { uidp: { childrenOf: server.organization }, pageSize: 2 }, auth);
          if (groups.error || groups.message?.groups.length !== 2 || !groups.message.nextPageToken) failures.push(`ListGroups ${protocol}: ${String(groups.error)}`);
          const next = await call(protocol, server.baseUrl, GroupsService.method.listGroups, { uidp: { childrenOf: server.organization }, pageSize: 2, pageToken: groups.message?.nextPageToken }, auth);
          if (next.error || next.message?.groups.length !== 2) failures.push(`ListGroups page 2 ${protocol}: ${String(next.error)}`);
          const repos = await call(protocol, server.baseUrl, ReposService.method.listRepos, { uidp: { childrenOf: server.organization } }, auth);
          if (repos.error || repos.message?.repos.map((r) => r.uid).join() !== uid) failures.push(`ListRepos ${protocol}: ${String(repos.error)}`);
        }
      }),
    );
    expect(failures).toEqual([]);

    // LISTEN runs on the direct connection only, none through the pooler.
    const listening = await scratch.sql<{ app: string }[]>`
      select application_name as app from pg_stat_activity
      where datname = current_database() and query ilike 'listen %'`;
    expect(listening.map((r) => r.app)).toEqual([LISTEN_APP]);

    // The repo's creation (and the groups') reach the sink.
    await sink.waitFor(6);
    expect(sink.received.some((r) => JSON.stringify(r).includes(uid))).toBe(true);
  }, 90_000);

  it("warns at start when the pooler's connections lack the server's statement_timeout and jit", async () => {
    const bare = await startPgbouncer({ poolMode: "transaction" });
    try {
      const server = await startServerProcess(bare.via(scratch.url), { DATABASE_POOL_MODE: "transaction", DATABASE_LISTEN_URL: scratch.url });
      servers.push(server);
      const warning = server.logs().split("\n").find((l) => l.includes("cannot set these on its connections"));
      expect(warning).toBeDefined();
      expect(JSON.parse(warning!)).toMatchObject({ settings: { statement_timeout: { expected: "10000", found: "0" } } });
      await server.kill();
    } finally {
      await bare.stop();
    }
  }, 60_000);

  it("without DATABASE_POOL_MODE=transaction, refuses to start with a line naming the setting", async () => {
    // A database of its own: the migrations' session advisory lock, taken through the pooler, may stay held
    // by one of its server connections (the very reason migrations run over the direct URL).
    const other = await createScratchDatabase();
    scratches.push(other);
    const failed = await startServerProcess(bouncer.via(other.url)).then(
      (s) => (servers.push(s), "started"),
      (err: Error) => err.message,
    );
    expect(failed).toMatch(/unsupported startup parameter.*set DATABASE_POOL_MODE=transaction \(and DATABASE_LISTEN_URL\)/);
  }, 60_000);
});
