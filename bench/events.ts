// Event delivery from a backlog on real PostgreSQL: how fast the servers' delivery workers drain N due
// deliveries to one local sink, beside a bare node:http client POSTing the same number of requests of the
// same size to the same sink at the same concurrency, in the same run.
//
//   npm run bench -- events [--events 100000] [--profile] [--sink-concurrency 32]
//
// DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres) names a server where the benchmark may
// create a scratch database; it is dropped at the end.
//
// Setup: a group with one subscription whose sink is bench/sink-server.ts (node:http on 127.0.0.1, answers
// 204 at once, counts requests and distinct ce-id values, verifies nothing). For each measurement the outbox
// is emptied and N customer events (a repo created, a body of about 400 bytes) are inserted in one statement,
// and the same transaction adds their deliveries (one per event, as the workers' expansion would) an hour
// ahead and clears the events' waiting expansions, so the backlog is not due while the server processes start (src/main.ts, development mode, so a loopback http
// sink is allowed). Then one transaction makes every delivery due and NOTIFYs the workers; the clock runs
// from its commit until the sink has seen N distinct ids and no delivery is left pending (every outcome
// recorded). Server CPU is utime + stime of the server processes (/proc) over that time, summed.
//
// Baseline: bench/post-client.ts in a child process, a keep-alive node:http client sending N POSTs with the
// headers and body of a real delivery request (captured from cloudevent.ts with the database's signing
// key: CloudEvent headers, a bearer token, the body), each with its own ce-id, with as many in flight as the
// servers allow one subscription (EVENTS_SINK_CONCURRENCY per process). Its CPU is the client process's.
//
// Sizes: one server with N/4, N/2 and N events (the time per event at each size says whether draining grows
// linearly with the backlog), then two servers with N. --profile runs the servers of the N-event
// measurements under `node --cpu-prof` and prints where the profiles are. --sink-concurrency N sets the
// servers' EVENTS_SINK_CONCURRENCY (and the baseline's in-flight requests with it).
import { mkdtempSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { openPostgres } from "../src/db/client.js";
import { groups, subscriptions } from "../src/db/schema/index.js";
import { deliveryRequest } from "../src/events/delivery/cloudevent.js";
import { createDeliveryQueue } from "../src/events/delivery/queue.js";
import { createKeyStore } from "../src/kernel/auth/index.js";
import { setLogLevel } from "../src/kernel/log.js";
import { newChildUid, newRootUid } from "../src/kernel/uidp.js";
import { DEFAULT_DELIVERY_OPTIONS } from "../src/config.js";
import { withScratchDatabase } from "./database.js";
import { BENCH_APPLICATION, backendPids, cpuSecondsOf } from "./cpu.js";
import { startApiServer, startScript } from "./processes.js";
import { say } from "./load.js";

const ISSUER = "https://bench.events.invalid";
const TYPE = "dev.chainguard.api.platform.registry.repo.created.v1";
const METHOD = "/chainguard.platform.registry.v2.ReposService/CreateRepo";
const BODY_TYPE = "chainguard.platform.registry.v2.Repo";
/** A measurement that makes no progress for this long has failed. */
const STALL_MS = 60_000;

export interface EventsBenchOptions {
  /** The largest backlog (the one-server sizes are a quarter, a half and all of it). */
  events: number;
  /** Run the servers of the largest measurements under --cpu-prof. */
  profile: boolean;
  /** EVENTS_SINK_CONCURRENCY of the servers (and the baseline's in-flight per server); the server's default without. */
  sinkConcurrency?: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Row {
  name: string;
  events: number;
  inFlight: number;
  seconds: number;
  /** CPU seconds of the process(es) doing the sending: the servers, or the baseline client. */
  cpu: number;
  sinkCpu: number;
  /** CPU seconds of the PostgreSQL backends serving the servers (servers only). */
  databaseCpu?: number;
  duplicates: number;
  /** Seconds at which a quarter, half, three quarters of the events had reached the sink (servers only). */
  quarters?: number[];
  /** Seconds in which the sink received nothing new (servers only). */
  idle?: number;
  /** Seconds from the sink having every event to no delivery pending (servers only). */
  settleLag?: number;
  baseline?: string;
}

export async function benchEvents(opts: EventsBenchOptions): Promise<void> {
  setLogLevel("warn");
  await withScratchDatabase("bench_events", (url) => measureOn(url, opts));
}

async function measureOn(url: string, opts: EventsBenchOptions): Promise<void> {
  const cleanups: (() => Promise<unknown>)[] = [];
  try {
    const database = await openPostgres(url, { max: 2 });
    let closeDatabase: (() => Promise<void>) | undefined = () => database.close();
    cleanups.push(async () => closeDatabase?.());
    // Named, so the PostgreSQL backends serving the servers can be told from the benchmark's own.
    const sqlc = postgres(url, { max: 2, onnotice: () => {}, connection: { application_name: BENCH_APPLICATION } });
    cleanups.push(() => sqlc.end({ timeout: 5 }));

    const sink = await startScript("bench/sink-server.ts");
    cleanups.push(() => sink.stop());
    const sinkPort = (JSON.parse(await sink.next()) as { port: number }).port;
    const sinkUrl = `http://127.0.0.1:${sinkPort}`;
    const sinkStats = async () => (await (await fetch(`${sinkUrl}/stats`)).json()) as { requests: number; distinct: number };
    const resetSink = async () => void (await fetch(`${sinkUrl}/reset`, { method: "POST" }));

    // The group, its subscription, and the identity events are attributed to.
    const org = newRootUid();
    const actor = newRootUid();
    await database.db.insert(groups).values({ uid: org, name: "bench" });
    const subscriptionUid = newChildUid(org);
    await database.db.insert(subscriptions).values({ uid: subscriptionUid, groupUid: org, sink: `${sinkUrl}/events` });

    // N repo-created events in one statement, their deliveries an hour ahead (expanded here: no server runs).
    const seed = async (n: number) => {
      const t0 = performance.now();
      await sqlc`truncate outbox_events cascade`;
      await sqlc.begin(async (tx) => {
        await tx`
          insert into outbox_events (type, subject, group_uid, audience, method, actor, body_type, extensions, body)
          select ${TYPE}, ${org} || '/' || lpad(to_hex(i), 16, '0'), ${org}, 2, ${METHOD}, ${actor}, ${BODY_TYPE}, jsonb_build_object('group', ${org}::text),
                 jsonb_build_object(
                   'uid', ${org} || '/' || lpad(to_hex(i), 16, '0'),
                   'name', 'apps/service-' || i,
                   'description', 'Service ' || i || ': a minimal image rebuilt nightly from source, with its SBOM and signatures',
                   'catalogTier', 'APPLICATION',
                   'aliases', jsonb_build_array('service-' || i, 'svc-' || i),
                   'activeTags', jsonb_build_array('latest', '1.' || (i % 40) || '.' || (i % 7), 'latest-dev'),
                   'sync_config', jsonb_build_object('source', 'cgr.dev/upstream/service-' || i, 'uniqueTags', true),
                   'createTime', to_char(now() at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                   'updateTime', to_char(now() at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
          from generate_series(1, ${n}::int) i`;
        // No server runs meanwhile: the events' deliveries are added here, as an expansion would add them
        // (events/delivery/queue.ts), but an hour ahead.
        await tx`
          insert into event_deliveries (event_id, subscription_uid, next_attempt_time, create_time)
          select e.id, ${subscriptionUid}, now() + interval '1 hour', e.create_time from outbox_events e`;
        await tx`delete from event_expansions`;
      });
      // The rows the update left behind are an artifact of seeding ahead: gone before measuring.
      await sqlc.unsafe("vacuum analyze outbox_events, event_deliveries");
      const [seeded] = await sqlc<{ count: string }[]>`select count(*) from event_deliveries where state = 'pending'`;
      if (Number(seeded?.count) !== n) throw new Error(`seeded ${seeded?.count} deliveries, expected ${n}`);
      say(`  seeded ${n} events and their deliveries in ${((performance.now() - t0) / 1000).toFixed(1)}s`);
    };

    // A real delivery request for one seeded event: the baseline sends requests of its size and headers.
    await seed(1);
    const [sample] = await sqlc<{ id: string; subject: string; body: string; create_time: Date }[]>`
      select id, subject, body::text as body, create_time from outbox_events limit 1`;
    const keys = await createKeyStore(database.db);
    const request = await deliveryRequest(
      {
        eventId: sample!.id,
        subscriptionUid,
        attempt: 1,
        createTime: sample!.create_time,
        sink: `${sinkUrl}/events`,
        subscriptionGroup: org,
        type: TYPE,
        subject: sample!.subject,
        eventGroup: org,
        method: METHOD,
        actor,
        body: sample!.body,
        bodyType: BODY_TYPE,
        extensions: { group: org },
        eventTime: sample!.create_time,
      },
      { issuer: ISSUER, keys },
    );
    const headerBytes = Object.entries(request.headers).reduce((n, [k, v]) => n + k.length + v.length + 4, 0);
    say(`  a delivery request: ${request.body.length} bytes of body, ${headerBytes} bytes of headers (token ${request.headers.authorization!.length - 7} bytes)`);
    const client = await startScript("bench/post-client.ts", [JSON.stringify({ port: sinkPort, path: "/events", headers: request.headers, body: request.body.toString("base64") })]);
    cleanups.push(() => client.stop());
    await client.next(); // ready

    const backendCpu = async (): Promise<Map<number, number>> => {
      const cpu = new Map<number, number>();
      for (const pid of await backendPids(sqlc, { not: BENCH_APPLICATION })) {
        try {
          cpu.set(pid, cpuSecondsOf(pid));
        } catch {
          // gone since
        }
      }
      return cpu;
    };

    const perServer = opts.sinkConcurrency ?? DEFAULT_DELIVERY_OPTIONS.perSubscription;
    const rows: Row[] = [];
    const makeDue = () =>
      sqlc.begin(async (tx) => {
        await tx`update event_deliveries set next_attempt_time = now() where state = 'pending'`;
        await tx`notify apiserver_events`;
      });

    // The queue alone, in this process, no sending: claims as the worker makes them when one sink is busy
    // (half of its slots free: perSubscription / 2 rows), each claim's rows settled as delivered in one
    // statement, chained as the worker chains its settles. The database's share of a delivery, as a ceiling.
    {
      const n = opts.events;
      await seed(n);
      const queue = createDeliveryQueue(database.db);
      const half = Math.floor(perServer / 2);
      const busy = new Map([[subscriptionUid, perServer - half]]);
      const cpu0 = process.cpuUsage();
      await makeDue();
      const backends0 = await backendCpu();
      const t0 = performance.now();
      let claimed = 0;
      let claims = 0;
      let settling: Promise<void> = Promise.resolve();
      for (;;) {
        const batch = await queue.claim({ perSubscription: perServer, busy, limit: DEFAULT_DELIVERY_OPTIONS.maxInFlight, leaseMs: 30_000 });
        if (batch.length === 0) break;
        claims++;
        claimed += batch.length;
        const settlements = batch.map((d) => ({ outcome: "delivered" as const, eventId: d.eventId, subscriptionUid: d.subscriptionUid, status: 204 }));
        settling = settling.then(() => queue.settle(settlements));
      }
      await settling;
      const seconds = (performance.now() - t0) / 1000;
      const cpu = process.cpuUsage(cpu0);
      let databaseCpu = 0;
      for (const [pid, cpu1] of await backendCpu()) databaseCpu += cpu1 - (backends0.get(pid) ?? 0);
      if (claimed !== n) throw new Error(`the queue alone claimed ${claimed} of ${n}`);
      const name = `the queue alone: ${claims} claims of ${half} and their settles, no sending`;
      rows.push({ name, events: n, inFlight: half, seconds, cpu: (cpu.user + cpu.system) / 1e6, databaseCpu, sinkCpu: 0, duplicates: 0 });
      say(`  measured ${name}: ${(n / seconds).toFixed(0)}/s`);
    }

    // The setup's pool is done with: from here on, every backend of the scratch database but the benchmark's
    // own polling connections serves a server.
    await closeDatabase();
    closeDatabase = undefined;

    const baseline = async (n: number, inFlight: number): Promise<string> => {
      await resetSink();
      const sinkCpu0 = cpuSecondsOf(sink.pid);
      const cpu0 = cpuSecondsOf(client.pid);
      client.send(`run ${n} ${inFlight}`);
      const { seconds, errors } = JSON.parse(await client.next()) as { seconds: number; errors: number };
      const cpu = cpuSecondsOf(client.pid) - cpu0;
      const sinkCpu = cpuSecondsOf(sink.pid) - sinkCpu0;
      const stats = await sinkStats();
      if (errors > 0 || stats.distinct !== n) throw new Error(`baseline: ${errors} errors, ${stats.distinct} of ${n} ids at the sink`);
      const name = `bare node:http client, ${n} POSTs, ${inFlight} in flight`;
      rows.push({ name, events: n, inFlight, seconds, cpu, sinkCpu, duplicates: stats.requests - stats.distinct });
      say(`  measured ${name}: ${(n / seconds).toFixed(0)}/s`);
      return name;
    };

    const delivery = async (n: number, servers: number, versus: string, profile: boolean) => {
      await seed(n);
      const profileDir = profile ? mkdtempSync(join(tmpdir(), "bench-events-prof-")) : undefined;
      const env = {
        DATABASE_URL: url,
        ISSUER_URL: ISSUER,
        SERVER_MODE: "development",
        LOG_LEVEL: "warn",
        EVENTS_SINK_CONCURRENCY: String(perServer),
        // A short grace: the benchmark's /healthz connection stays open and would hold a stop for the whole
        // grace period, past which the launcher kills the server (and its CPU profile is never written).
        SHUTDOWN_GRACE_MS: "2000",
      };
      const nodeArgs = profileDir ? ["--cpu-prof", `--cpu-prof-dir=${profileDir}`] : undefined;
      const apis = await Promise.all(Array.from({ length: servers }, () => startApiServer(env, { quiet: true, nodeArgs })));
      try {
        await sleep(1000); // the workers started and found nothing due
        await resetSink();
        const pids = apis.map((a) => a.serverPid);
        const serverCpu = () => pids.reduce((sum, pid) => sum + cpuSecondsOf(pid), 0);
        const cpu0 = serverCpu();
        const sinkCpu0 = cpuSecondsOf(sink.pid);
        const backends0 = await backendCpu();
        await makeDue();
        const t0 = performance.now();
        const elapsed = () => (performance.now() - t0) / 1000;

        // Until the sink has every event (noting when it had each quarter), then until every outcome is recorded.
        const quarters: number[] = [];
        let last = { distinct: -1, at: performance.now() };
        // Time spent in polls (50 ms apart) in which the sink received nothing new: a worker asleep or starved.
        let idle = 0;
        let previous = { distinct: 0, at: performance.now() };
        for (;;) {
          const stats = await sinkStats();
          const now = performance.now();
          if (stats.distinct === previous.distinct) idle += now - previous.at;
          previous = { distinct: stats.distinct, at: now };
          while (quarters.length < 3 && stats.distinct >= (n * (quarters.length + 1)) / 4) quarters.push(elapsed());
          if (stats.distinct >= n) break;
          if (stats.distinct !== last.distinct) last = { distinct: stats.distinct, at: performance.now() };
          else if (performance.now() - last.at > STALL_MS) throw new Error(`no progress for ${STALL_MS / 1000}s at ${stats.distinct} of ${n} events`);
          await sleep(50);
        }
        const atSink = elapsed();
        for (;;) {
          const [left] = await sqlc<{ pending: string }[]>`select count(*) as pending from event_deliveries where state = 'pending'`;
          const pending = Number(left?.pending);
          if (pending === 0) break;
          if (elapsed() - atSink > STALL_MS / 1000) throw new Error(`${pending} deliveries still pending ${STALL_MS / 1000}s after the sink had them all`);
          await sleep(20);
        }
        const seconds = elapsed();
        const cpu = serverCpu() - cpu0;
        const sinkCpu = cpuSecondsOf(sink.pid) - sinkCpu0;
        // Backends that came and went during the run are not counted (the pools keep theirs while busy).
        let databaseCpu = 0;
        for (const [pid, cpu1] of await backendCpu()) databaseCpu += cpu1 - (backends0.get(pid) ?? 0);
        const stats = await sinkStats();
        const [attempts] = await sqlc<{ extra: string; undelivered: string }[]>`
          select coalesce(sum(attempts - 1), 0) as extra, count(*) filter (where state <> 'delivered') as undelivered from event_deliveries`;
        if (Number(attempts!.undelivered) > 0) throw new Error(`${attempts!.undelivered} deliveries not delivered`);
        if (Number(attempts!.extra) > 0) say(`  ${attempts!.extra} attempts beyond the first`);
        const name = `${servers} server${servers > 1 ? "s" : ""}, backlog of ${n}`;
        rows.push({ name, events: n, inFlight: servers * perServer, seconds, cpu, sinkCpu, databaseCpu, duplicates: stats.requests - stats.distinct, quarters, idle: idle / 1000, settleLag: seconds - atSink, baseline: versus });
        say(`  measured ${name}: ${(n / seconds).toFixed(0)}/s`);
      } finally {
        await Promise.all(apis.map((a) => a.stop()));
      }
      if (profileDir) say(`  CPU profiles of the servers (and of their tsx launchers) in ${profileDir}`);
    };

    const n = opts.events;
    const sizes = [Math.round(n / 4), Math.round(n / 2), n];
    for (const size of sizes) await delivery(size, 1, await baseline(size, perServer), opts.profile && size === n);
    await delivery(n, 2, await baseline(n, 2 * perServer), opts.profile);

    const byName = new Map(rows.map((r) => [r.name, r]));
    const ms = (seconds: number, events: number) => ((seconds * 1000) / events).toFixed(3);
    console.log(
      `\nEvent delivery from a backlog to one local sink (${perServer} in flight per server), node ${process.version}, load average ${loadavg()[0]!.toFixed(2)}\n`,
    );
    console.log("| sender | events | in flight | seconds | events/s | ms per event | × baseline | sender CPU ms/event | PostgreSQL CPU ms/event | sink CPU ms/event | duplicates |");
    console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (const r of rows) {
      const base = r.baseline ? byName.get(r.baseline) : undefined;
      const ratio = base ? (r.events / r.seconds / (base.events / base.seconds)).toFixed(2) : "";
      console.log(
        `| ${r.name} | ${r.events} | ${r.inFlight} | ${r.seconds.toFixed(2)} | ${(r.events / r.seconds).toFixed(0)} | ${ms(r.seconds, r.events)} | ${ratio} | ${ms(r.cpu, r.events)} | ${r.databaseCpu === undefined ? "" : ms(r.databaseCpu, r.events)} | ${ms(r.sinkCpu, r.events)} | ${r.duplicates} |`,
      );
    }
    console.log("\nThe servers' progress (seconds from due to the sink having each quarter of the events; then to every outcome recorded; and the time in 50 ms polls of the sink that found nothing new):\n");
    console.log("| backlog | 25% | 50% | 75% | 100% at the sink | all recorded | nothing new at the sink |\n|---|---:|---:|---:|---:|---:|---:|");
    for (const r of rows) {
      if (!r.quarters) continue;
      const atSink = r.seconds - r.settleLag!;
      console.log(`| ${r.name} | ${r.quarters.map((q) => q.toFixed(2)).join(" | ")} | ${atSink.toFixed(2)} | ${r.seconds.toFixed(2)} | ${r.idle!.toFixed(2)} |`);
    }
  } finally {
    for (const c of cleanups.reverse()) await c().catch(() => {});
  }
}
