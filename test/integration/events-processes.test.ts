// Event delivery by real server processes on one PostgreSQL database: a server killed with SIGKILL while
// deliveries are in flight loses none of them (a restarted one delivers every committed event; what the
// dead one had sent but not recorded comes again, and is counted); one stopped with SIGTERM finishes and
// records what it sent, so nothing comes twice; and two servers share a backlog with each event delivered once.
import { eq, sql } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import { eventDeliveries, outboxEvents, subscriptions } from "../../src/db/schema/index.js";
import { newChildUid } from "../../src/kernel/uidp.js";
import { until } from "../support/poll.js";
import { createScratchDatabase, openDirect, startServerProcess, type DirectAccess, type ScratchDatabase, type ServerProcess } from "../support/server-process.js";
import { startSink, type TestSink } from "../support/sink.js";

const FAST = { EVENTS_DELIVERY_TIMEOUT_MS: "1000", EVENTS_RETRY_BASE_MS: "50" };

describe.skipIf(!process.env.DATABASE_URL)("event delivery across server processes (PostgreSQL)", () => {
  let scratch: ScratchDatabase | undefined;
  let direct: DirectAccess | undefined;
  let receiver: TestSink | undefined;
  const servers: ServerProcess[] = [];

  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.kill()));
    await receiver?.close();
    await direct?.close();
    await scratch?.dispose();
  });

  async function setUp(): Promise<{ org: string; token: string; subscription: string }> {
    scratch = await createScratchDatabase();
    // A first server applies the migrations; the test's own connection comes after.
    servers.push(await startServerProcess(scratch.url, FAST));
    direct = await openDirect(scratch.url);
    const world = await direct.world();
    receiver = await startSink();
    const subscription = newChildUid(world.org);
    await direct.db.insert(subscriptions).values({ uid: subscription, groupUid: world.org, sink: receiver.url });
    return { org: world.org, token: world.token.owner, subscription };
  }

  it("a server killed with SIGKILL mid-delivery: a restarted one delivers every committed event", async () => {
    const { org, token, subscription } = await setUp();
    const [first] = servers;
    // A slow sink, so deliveries are in flight when the server dies.
    receiver!.answer = () => ({ status: 200, afterMs: 300 });
    const committed: string[] = [];
    for (let i = 0; i < 20; i++) {
      const res = await fetch(`${first!.baseUrl}/registry/v2/repos/${org}`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ name: `crash-${i}` }),
      });
      expect(res.status).toBe(200);
      committed.push(String(((await res.json()) as { uid: string }).uid));
    }
    await receiver!.waitFor(3);
    await first!.kill();
    const ids = (await direct!.db.select({ id: outboxEvents.id }).from(outboxEvents).where(eq(outboxEvents.groupUid, org))).map((r) => r.id);
    expect(ids).toHaveLength(20);

    servers.push(await startServerProcess(scratch!.url, FAST));
    await until("every committed event received", async () => receiver!.idCounts().size, (n) => n === 20, 30_000);
    expect([...receiver!.idCounts().keys()].sort()).toEqual([...ids].sort());
    const rows = await until(
      "every delivery recorded",
      () => direct!.db.select().from(eventDeliveries).where(eq(eventDeliveries.subscriptionUid, subscription)),
      (rs) => rs.length === 20 && rs.every((r) => r.state === "delivered"),
      30_000,
    );
    expect(rows).toHaveLength(20);
    // Duplicates come only from the crash: deliveries the dead server had sent without recording them.
    const duplicates = receiver!.received.length - 20;
    console.info(`events after SIGKILL: 20 committed, ${receiver!.received.length} received, ${duplicates} duplicate(s)`);
    expect(duplicates).toBeLessThanOrEqual(20);
  });

  it("a server stopped with SIGTERM mid-delivery lets its deliveries finish and records them: nothing comes twice", async () => {
    const { org, token, subscription } = await setUp();
    const [first] = servers;
    receiver!.answer = () => ({ status: 200, afterMs: 500 });
    for (let i = 0; i < 10; i++) {
      const res = await fetch(`${first!.baseUrl}/registry/v2/repos/${org}`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ name: `stop-${i}` }),
      });
      expect(res.status).toBe(200);
    }
    await receiver!.waitFor(1);
    first!.child.kill("SIGTERM");
    expect((await first!.exited).code).toBe(0);
    // Whatever it had sent was answered and recorded before it exited; the rest is due for the next server.
    const recorded = await direct!.db.select().from(eventDeliveries).where(eq(eventDeliveries.subscriptionUid, subscription));
    const delivered = recorded.filter((r) => r.state === "delivered").length;
    expect(delivered).toBe(receiver!.received.length);
    servers.push(await startServerProcess(scratch!.url, FAST));
    await until("every event received", async () => receiver!.idCounts().size, (n) => n === 10, 30_000);
    await new Promise((r) => setTimeout(r, 1_000));
    expect(receiver!.received).toHaveLength(10);
  });

  it("two servers share a backlog, and each event is delivered once", async () => {
    const { org, subscription } = await setUp();
    const [first] = servers;
    await first!.kill();
    servers.length = 0;
    // 2,000 events committed while no server runs.
    const N = 2_000;
    await direct!.db.execute(sql`
      INSERT INTO outbox_events (type, subject, group_uid, audience, method, actor, body)
      SELECT 'dev.chainguard.api.platform.registry.repo.created.v1', ${org} || '/' || lpad(to_hex(i), 16, '0'), ${org}, 2,
             '/chainguard.platform.registry.v2.ReposService/CreateRepo', 'bench', jsonb_build_object('uid', ${org} || '/' || lpad(to_hex(i), 16, '0'), 'name', 'repo-' || i)
      FROM generate_series(1, ${N}) i`);
    const env = { ...FAST, LOG_LEVEL: "debug" };
    servers.push(...(await Promise.all([startServerProcess(scratch!.url, env), startServerProcess(scratch!.url, env)])));
    await until("the backlog received", async () => receiver!.idCounts().size, (n) => n === N, 60_000);
    await until(
      "the backlog recorded",
      async () => (await direct!.db.select({ state: eventDeliveries.state }).from(eventDeliveries).where(eq(eventDeliveries.subscriptionUid, subscription))).filter((r) => r.state === "delivered").length,
      (n) => n === N,
      30_000,
    );
    expect(receiver!.received).toHaveLength(N);
    expect([...receiver!.idCounts().values()].every((n) => n === 1)).toBe(true);
    // Both took part: each logged some of the deliveries, and together all of them.
    const delivered = servers.map((s) => (s.logs().match(/"msg":"events: delivered"/g) ?? []).length);
    console.info(`two servers delivered ${delivered.join(" + ")} of ${N}`);
    expect(delivered.every((n) => n > 0)).toBe(true);
    expect(delivered[0]! + delivered[1]!).toBe(N);
  });
});
