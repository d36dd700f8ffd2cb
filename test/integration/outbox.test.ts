// The unit of work, over every method that declares an event (apiserver.options.v1.event), generated from the
// descriptors: a guard fails when a method of an implemented service declares an event and has no row here.
// For each method, on every protocol:
//   - a successful call records exactly one outbox row: the declared type, the method, the caller, the
//     subject and the group it happened in, and the response (the request, for a delete) as its body;
//   - a call refused after authorization (bad input, a missing resource, a conflict after a first write)
//     records nothing;
//   - a call whose event cannot be recorded (a trigger refuses the outbox row) fails, and nothing it wrote
//     is left: the mutation and its event commit together or not at all.
// Runs on the embedded database, and on PostgreSQL when DATABASE_URL is set.
import { create, toJson, type DescMethodUnary } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { outboxEvents } from "../../src/db/schema/index.js";
import { eventRuleOf, registry } from "../../src/kernel/descriptors.js";
import { eventBody } from "../../src/kernel/outbox.js";
import { CLIENT_SECRET, createEventedCalls, eventedKeyOf as keyOf, eventedMethods } from "../support/evented-calls.js";
import { call, protocols, type Protocol } from "../contract/harness.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";

let server: TestServer;
let world: World;
const { table, prepare } = createEventedCalls();
// The bindings are only inspected for their services here (test cases are collected before a server runs).
const evented = eventedMethods();

describe("the outbox table covers every method that declares an event", () => {
  it("has a row for each event-declaring method of the implemented services, and no other", () => {
    expect(evented.length).toBeGreaterThan(0);
    expect(Object.keys(table).sort()).toEqual(evented.map(keyOf).sort());
  });
});

/** The number of outbox rows and the time of the newest (calls run one at a time in this file). */
async function outboxMark(): Promise<{ count: number; newest: string }> {
  const [row] = await server.database.db
    .select({ count: sql<number>`count(*)::int`, newest: sql<string>`coalesce(max(${outboxEvents.createTime}), '-infinity')::text` })
    .from(outboxEvents);
  return row!;
}

/**
 * A digest of every resource table: equal before and after means nothing was changed. An identity's
 * last_seen_time is left out: authentication records it in the background, whatever the call does.
 */
async function stateDigest(): Promise<string> {
  const tables = [
    "groups", "identities", "roles", "role_bindings", "repos", "tags", "subscriptions", "identity_providers", "external_group_role_mappings",
    "account_associations", "terms_acceptances", "group_access_requests", "group_invites", "outbox_events",
  ];
  const parts = await Promise.all(
    tables.map(async (t) => {
      const [row] = await server.database.db
        .select({ d: sql<string | null>`md5(string_agg((to_jsonb(x) - 'last_seen_time')::text, '|' order by x::text))` })
        .from(sql.raw(`${t} x`));
      return `${t}:${row?.d ?? ""}`;
    }),
  );
  return parts.join(",");
}

beforeAll(async () => {
  server = await startTestServer();
  world = await seedWorld(server, "outbox-org");
  await prepare(server, world);
  const { db } = server.database;
  // A switch that makes the outbox refuse the events of one type.
  await db.execute(sql`create table test_outbox_fault (type text primary key)`);
  await db.execute(sql.raw(`
    create function test_outbox_fault() returns trigger language plpgsql as $$
    begin
      if exists (select 1 from test_outbox_fault where type = new.type) then
        raise exception 'test: the outbox refuses %', new.type;
      end if;
      return new;
    end $$`));
  await db.execute(sql`create trigger test_outbox_fault before insert on outbox_events for each row execute function test_outbox_fault()`);
});
afterAll(async () => {
  await server?.close();
});

describe.each(protocols)("unit of work [%s]", (protocol: Protocol) => {
  describe.each(evented.filter((m) => table[keyOf(m)]).map((m) => [keyOf(m), m] as const))("%s", (_key, method) => {
    const row = () => table[keyOf(method)]!;
    const rule = eventRuleOf(method)!;
    const unary = method as DescMethodUnary;

    it("a successful call records exactly one event, in its transaction", async () => {
      const c = await row().ok();
      const before = await outboxMark();
      const out = await call(protocol, server.baseUrl, unary, c.request as never, world.auth("owner"));
      expect(out.error?.message).toBeUndefined();
      expect((await outboxMark()).count).toBe(before.count + 1);
      const [event] = await server.database.db.select().from(outboxEvents).where(sql`${outboxEvents.createTime} > ${before.newest}::timestamptz`);
      expect(event?.method).toBe(`/${method.parent.typeName}/${method.name}`);
      const response = out.message as { uid?: string };
      const subject = c.subject ?? response.uid!;
      expect(event).toMatchObject({
        type: rule.type,
        audience: rule.audience,
        actor: world.identity.owner,
        subject,
        groupUid: c.group === "<subject>" ? subject : (c.group ?? world.team),
      });
      // A delete (google.protobuf.Empty), or a response with nothing in it: the body is the request, as events
      // carry it (secrets and server-added fields cleared; see events-published-sdk.test.ts for the published shapes).
      const isDelete = method.output.fields.length === 0;
      const [desc, message] = isDelete ? [method.input, create(method.input, c.request as never)] : [method.output, out.message!];
      const body = eventBody(desc, message);
      expect(event!.body).toEqual(body === undefined ? null : toJson(desc, body, { registry }));
      const secrets = [CLIENT_SECRET, (out.message as { token?: string }).token, (out.message as { code?: string }).code].filter((x): x is string => Boolean(x));
      for (const secret of secrets) expect(JSON.stringify(event!.body)).not.toContain(secret);
    });

    it("a call refused after authorization records nothing and changes nothing", async () => {
      const r = await row().refused();
      const before = await stateDigest();
      const out = await call(protocol, server.baseUrl, unary, r.request as never, world.auth("owner"));
      expect(out.error?.code, out.error?.message).toBe(r.code);
      expect(await stateDigest()).toBe(before);
    });

    it("a call whose event cannot be recorded fails and leaves nothing it wrote", async () => {
      const c = await row().ok();
      const { db } = server.database;
      await db.execute(sql`insert into test_outbox_fault values (${rule.type})`);
      try {
        const before = await stateDigest();
        const out = await call(protocol, server.baseUrl, unary, c.request as never, world.auth("owner"));
        expect(out.error?.code).toBe(Code.Internal);
        expect(await stateDigest()).toBe(before);
      } finally {
        await db.execute(sql`delete from test_outbox_fault`);
      }
    });
  });
});
