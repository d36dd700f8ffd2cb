// Event delivery in one server (on the embedded database and on PostgreSQL): what a sink receives for a
// repo's life (CloudEvent attributes, a token verifiable at the server's JWKS, the body's digest), which
// subscriptions receive what, retries (same ce-id, one acknowledgement), a hanging sink beside a healthy
// one, giving up, pruning, and sinks refused at connect time under the production policy.
import { createHash } from "node:crypto";
import { and, eq, sql } from "drizzle-orm";
import { createRemoteJWKSet, jwtVerify } from "jose";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { eventDeliveries, outboxEvents, subscriptions } from "../../src/db/schema/index.js";
import { sinkPolicyFor } from "../../src/events/sinks.js";
import { newChildUid } from "../../src/kernel/uidp.js";
import { until } from "../support/poll.js";
import { startSink, type TestSink } from "../support/sink.js";
import { startTestServer, type TestServer, type TestServerOptions } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";

const FAST = { retryBaseMs: 50, retryMaxMs: 200, pollMs: 50, timeoutMs: 2_000 };

let server: TestServer;
let world: World;
const sinks: TestSink[] = [];

async function sink(): Promise<TestSink> {
  const s = await startSink();
  sinks.push(s);
  return s;
}

async function subscribe(db: TestServer, group: string, url: string): Promise<string> {
  const uid = newChildUid(group);
  await db.database.db.insert(subscriptions).values({ uid, groupUid: group, sink: url });
  return uid;
}

async function rest(method: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${server.baseUrl}${path}`, {
    method,
    headers: { ...world.auth("owner"), "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, unknown>;
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

async function deliveriesOf(subscriptionUid: string) {
  return server.database.db.select().from(eventDeliveries).where(eq(eventDeliveries.subscriptionUid, subscriptionUid));
}

beforeAll(async () => {
  server = await startTestServer({ delivery: FAST });
  world = await seedWorld(server);
});

afterAll(async () => {
  await server?.close();
});

afterEach(async () => {
  for (const s of sinks.splice(0)) await s.close();
  // Each case subscribes anew: earlier subscriptions (and their deliveries) go.
  await server.database.db.delete(subscriptions);
});

describe("a repo's life, as its group's subscription receives it", () => {
  it("delivers created, updated and deleted as signed CloudEvents, once each", async () => {
    const receiver = await sink();
    // Subscribed through the API (the other cases write the row directly).
    const subscription = String((await rest("POST", `/events/v2/subscriptions/${world.org}`, { sink: receiver.url })).uid);
    // Its own creation is an event of the group: received, and set aside here.
    await receiver.waitFor(1);
    expect(receiver.received[0]!.headers["ce-type"]).toBe("dev.chainguard.api.events.subscription.created.v1");
    receiver.received.splice(0);
    const created = await rest("POST", `/registry/v2/repos/${world.org}`, { name: "events-e2e" });
    const uid = String(created.uid);
    await rest("PATCH", `/registry/v2/repos/${uid}`, { uid, name: "events-e2e", description: "changed" });
    await rest("DELETE", `/registry/v2/repos/${uid}`);

    const got = await receiver.waitFor(3);
    // Nothing more comes: each event is acknowledged once.
    await new Promise((r) => setTimeout(r, 300));
    expect(receiver.received).toHaveLength(3);

    const jwks = createRemoteJWKSet(new URL(`${server.baseUrl}/.well-known/jwks.json`));
    const byType = new Map(got.map((r) => [String(r.headers["ce-type"]), r]));
    const source = (m: string) => `${server.baseUrl}/chainguard.platform.registry.v2.ReposService/${m}`;
    const expected = [
      ["dev.chainguard.api.platform.registry.repo.created.v1", source("CreateRepo")],
      ["dev.chainguard.api.platform.registry.repo.updated.v1", source("UpdateRepo")],
      ["dev.chainguard.api.platform.registry.repo.deleted.v1", source("DeleteRepo")],
    ] as const;
    const ids = new Set<string>();
    for (const [type, src] of expected) {
      const r = byType.get(type);
      expect(r, type).toBeDefined();
      const h = r!.headers;
      expect(h["ce-specversion"]).toBe("1.0");
      expect(h["ce-source"]).toBe(src);
      expect(h["ce-subject"]).toBe(uid);
      expect(h["ce-group"]).toBe(world.org);
      expect(h["content-type"]).toBe("application/json");
      expect(Number.isNaN(Date.parse(String(h["ce-time"])))).toBe(false);
      ids.add(String(h["ce-id"]));

      const token = /^Bearer (.+)$/.exec(String(h.authorization))?.[1];
      const { payload } = await jwtVerify(token!, jwks, { issuer: server.baseUrl, audience: "customer" });
      expect(payload.sub).toBe(`webhook:${world.org}`);
      expect(payload.webhook).toEqual({ digest: `sha256:${createHash("sha256").update(r!.body).digest("hex")}` });

      const body = JSON.parse(r!.body.toString()) as { actor: { subject: string }; body: Record<string, unknown> };
      expect(body.actor).toEqual({ subject: world.identity.owner });
      expect(body.body.uid).toBe(uid);
      if (type.endsWith("updated.v1")) expect(body.body.description).toBe("changed");
    }
    expect(ids.size).toBe(3);
    const rows = await until("recorded", () => deliveriesOf(subscription), (rs) => rs.every((d) => d.state === "delivered"), 5_000);
    expect(rows.map((d) => [d.state, d.attempts])).toEqual(Array.from({ length: 4 }, () => ["delivered", 1]));
  });

  it("a subscription receives its group's events and its descendants', not its ancestors' or siblings'", async () => {
    const [onOrg, onTeam, onOther] = [await sink(), await sink(), await sink()];
    await subscribe(server, world.org, onOrg.url);
    await subscribe(server, world.team, onTeam.url);
    await subscribe(server, world.other, onOther.url);
    const inTeam = String((await rest("POST", `/registry/v2/repos/${world.team}`, { name: "in-team" })).uid);
    const inOrg = String((await rest("POST", `/registry/v2/repos/${world.org}`, { name: "in-org" })).uid);
    await onOrg.waitFor(2);
    await onTeam.waitFor(1);
    await new Promise((r) => setTimeout(r, 300));
    expect(onOrg.received.map((r) => r.headers["ce-subject"]).sort()).toEqual([inOrg, inTeam].sort());
    expect(onTeam.received.map((r) => r.headers["ce-subject"])).toEqual([inTeam]);
    expect(onOther.received).toHaveLength(0);
    // The token names the subscription's group; ce-group the event's.
    const teamEvent = onOrg.received.find((r) => r.headers["ce-subject"] === inTeam)!;
    expect(teamEvent.headers["ce-group"]).toBe(world.team);
  });
});

describe("retries", () => {
  it("a sink answering 500 twice then 200 gets three attempts with one ce-id, and one acknowledgement", async () => {
    const receiver = await sink();
    receiver.answer = (_r, i) => (i < 2 ? 500 : 200);
    const subscription = await subscribe(server, world.org, receiver.url);
    await rest("POST", `/registry/v2/repos/${world.org}`, { name: "flaky-sink" });
    await receiver.waitFor(3);
    await new Promise((r) => setTimeout(r, 300));
    expect(receiver.received).toHaveLength(3);
    expect(new Set(receiver.received.map((r) => r.headers["ce-id"])).size).toBe(1);
    // Each attempt carries a token of its own, for the same body.
    expect(new Set(receiver.received.map((r) => r.body.toString())).size).toBe(1);
    const [row] = await until("delivered", () => deliveriesOf(subscription), (rows) => rows[0]?.state === "delivered", 5_000);
    expect(row).toMatchObject({ state: "delivered", attempts: 3, lastStatus: 200 });
  });

  it("a hanging sink times out and is retried, and another sink is not held up", async () => {
    const slow = await startTestServer({ delivery: { ...FAST, timeoutMs: 500, perSubscription: 2 } });
    try {
      const w = await seedWorld(slow, "hang");
      const [hanging, healthy] = [await sink(), await sink()];
      hanging.answer = () => "hang";
      const stuck = await subscribe(slow, w.org, hanging.url);
      await subscribe(slow, w.org, healthy.url);
      // More events than the hanging sink has slots: the healthy one gets every one of them meanwhile.
      for (let i = 0; i < 6; i++) {
        const res = await fetch(`${slow.baseUrl}/registry/v2/repos/${w.org}`, {
          method: "POST",
          headers: { ...w.auth("owner"), "content-type": "application/json" },
          body: JSON.stringify({ name: `hang-${i}` }),
        });
        expect(res.status).toBe(200);
      }
      const started = Date.now();
      await healthy.waitFor(6, 5_000);
      expect(Date.now() - started).toBeLessThan(5_000);
      // The hanging sink never has more than its 2 slots' worth at once, and its attempts time out and retry.
      const rows = await until("timed out and retried", () => slow.database.db.select().from(eventDeliveries).where(eq(eventDeliveries.subscriptionUid, stuck)), (rs) => rs.some((r) => r.attempts >= 2), 10_000);
      expect(rows.every((r) => r.state === "pending")).toBe(true);
      expect(rows.find((r) => r.attempts >= 2)?.lastError).toMatch(/^timeout after 500 ms/);
    } finally {
      await slow.close();
    }
  });

  it("a hanging sink does not hold up another subscription's deliveries to the same origin (a connection pool per subscription)", async () => {
    // Hanging attempts time out after 8 s: far beyond the 6 s the healthy subscription is given, even on a loaded machine.
    const slow = await startTestServer({ delivery: { ...FAST, timeoutMs: 8_000, perSubscription: 2 } });
    try {
      const w = await seedWorld(slow, "origin");
      // One receiver, one origin: /hang never answers, /ok answers at once.
      const receiver = await sink();
      receiver.answer = (r) => (r.path.startsWith("/hang") ? "hang" : 200);
      const origin = new URL(receiver.url).origin;
      await subscribe(slow, w.org, `${origin}/hang`);
      await subscribe(slow, w.org, `${origin}/ok`);
      const started = Date.now();
      for (let i = 0; i < 6; i++) {
        const res = await fetch(`${slow.baseUrl}/registry/v2/repos/${w.org}`, {
          method: "POST",
          headers: { ...w.auth("owner"), "content-type": "application/json" },
          body: JSON.stringify({ name: `origin-${i}` }),
        });
        expect(res.status).toBe(200);
      }
      // Every event reaches /ok long before the hanging attempts time out (8 s), which would free connections.
      await until("all six at /ok", async () => receiver.received.filter((r) => r.path === "/ok").length, (n) => n === 6, 6_000);
      expect(Date.now() - started).toBeLessThan(6_000);
      expect(receiver.received.filter((r) => r.path === "/hang").length).toBe(2);
    } finally {
      await slow.close();
    }
  });

  it("gives up after the retry period and keeps the delivery, visible in event_delivery_problems", async () => {
    const brief = await startTestServer({ delivery: { ...FAST, retryForMs: 300 } });
    try {
      const w = await seedWorld(brief, "give-up");
      const receiver = await sink();
      receiver.answer = () => 503;
      const subscription = await subscribe(brief, w.org, receiver.url);
      await fetch(`${brief.baseUrl}/registry/v2/repos/${w.org}`, {
        method: "POST",
        headers: { ...w.auth("owner"), "content-type": "application/json" },
        body: JSON.stringify({ name: "doomed" }),
      });
      const [row] = await until("failed", () => brief.database.db.select().from(eventDeliveries).where(eq(eventDeliveries.subscriptionUid, subscription)), (rs) => rs[0]?.state === "failed", 10_000);
      // Given up only once the delivery was retryForMs old, however many attempts fitted in that time: on a
      // loaded machine the first attempt can come after the period, and is then the only one (retries
      // within the period are the test of three attempts above).
      expect(row!.attempts).toBeGreaterThanOrEqual(1);
      expect(row!.doneTime!.getTime() - row!.createTime.getTime()).toBeGreaterThanOrEqual(300);
      expect(row!.lastError).toMatch(/^HTTP 503/);
      expect(brief.events!.stats.failed).toBe(1);
      const problems = await brief.database.db.execute(sql`SELECT subscription_uid, state, event_type, last_status FROM event_delivery_problems`);
      const list = (Array.isArray(problems) ? problems : (problems as { rows: unknown[] }).rows) as Record<string, unknown>[];
      expect(list).toEqual([{ subscription_uid: subscription, state: "failed", event_type: "dev.chainguard.api.platform.registry.repo.created.v1", last_status: 503 }]);
      // Nothing more is sent once it has been given up.
      const count = receiver.received.length;
      await new Promise((r) => setTimeout(r, 300));
      expect(receiver.received.length).toBe(count);
    } finally {
      await brief.close();
    }
  });
});

describe("pruning", () => {
  it("deletes delivered rows and their events after the retention period, and keeps failed ones", async () => {
    const pruned = await startTestServer({ delivery: { ...FAST, retentionMs: 1, failedRetentionMs: 3_600_000, pruneEveryMs: 200, retryForMs: 100 } });
    try {
      const w = await seedWorld(pruned, "prune");
      const [ok, down] = [await sink(), await sink()];
      down.answer = () => 500;
      const good = await subscribe(pruned, w.org, ok.url);
      const bad = await subscribe(pruned, w.team, down.url);
      const post = (group: string, name: string) =>
        fetch(`${pruned.baseUrl}/registry/v2/repos/${group}`, { method: "POST", headers: { ...w.auth("owner"), "content-type": "application/json" }, body: JSON.stringify({ name }) });
      await post(w.org, "kept-briefly");
      await post(w.team, "kept-failed");
      const { db } = pruned.database;
      await until("delivered rows pruned", () => db.select().from(eventDeliveries).where(eq(eventDeliveries.subscriptionUid, good)), (rs) => rs.length === 0, 10_000);
      const failed = await until("failed kept", () => db.select().from(eventDeliveries).where(eq(eventDeliveries.subscriptionUid, bad)), (rs) => rs[0]?.state === "failed", 10_000);
      // The failed delivery keeps its event; the event delivered everywhere is gone.
      const events = await db.select({ id: outboxEvents.id }).from(outboxEvents).where(and(eq(outboxEvents.groupUid, w.team)));
      expect(events.map((e) => e.id)).toContain(failed[0]!.eventId);
      await until("delivered-only events pruned", () => db.select({ id: outboxEvents.id }).from(outboxEvents).where(eq(outboxEvents.groupUid, w.org)), (rs) => rs.length === 0, 10_000);
    } finally {
      await pruned.close();
    }
  });
});

describe("sinks refused at connect time (production policy)", () => {
  it("refuses a name that now resolves to a private address (DNS rebinding), and private IP literals", async () => {
    const receiver = await sink();
    const port = new URL(receiver.url).port;
    // The name resolved to a public address when it was subscribed; it now resolves to loopback.
    const rebinding = async () => [{ address: "127.0.0.1", family: 4 }];
    const opts: TestServerOptions = { delivery: { ...FAST, retryForMs: 200 }, sinks: { ...sinkPolicyFor("production", rebinding), allowInsecureLoopback: true } };
    const prod = await startTestServer(opts);
    try {
      const w = await seedWorld(prod, "prod");
      const byName = await subscribe(prod, w.org, `http://localhost:${port}/hook`);
      const byAddress = await subscribe(prod, w.team, `http://127.0.0.1:${port}/hook`);
      await fetch(`${prod.baseUrl}/registry/v2/repos/${w.team}`, { method: "POST", headers: { ...w.auth("owner"), "content-type": "application/json" }, body: JSON.stringify({ name: "never-sent" }) });
      const { db } = prod.database;
      for (const uid of [byName, byAddress]) {
        const [row] = await until("refused", () => db.select().from(eventDeliveries).where(eq(eventDeliveries.subscriptionUid, uid)), (rs) => rs[0]?.state === "failed", 10_000);
        expect(row!.lastError).toMatch(/^sink refused: .*127\.0\.0\.1.*loopback/);
      }
      expect(receiver.received).toHaveLength(0);
    } finally {
      await prod.close();
    }
  });
});
