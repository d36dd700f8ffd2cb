// Soak: a mixed workload of reads and writes over every protocol for a long run (default 10 minutes), on real
// PostgreSQL, reporting errors by code, the p99 of each interval and the server's memory over time.
//
//   npm run bench:soak -- [--minutes 10] [--concurrency 10] [--interval 30] [--warmup 60]
//
// DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres) names a server where the benchmark may
// create a scratch database; it is dropped at the end. The API server runs as a child process on it
// (production mode), and every call carries a token of the organization's owner.
//
// Each client speaks one protocol (client i: gRPC, gRPC-web, Connect JSON, Connect binary over HTTP/2, REST,
// in turn) through Connect's own clients and the contract harness's REST encoding, keeping its connection,
// and runs rounds one after another until the time is up. A round creates, reads, updates, lists and then
// deletes what it created: a group under the organization, a repo in it, a tag in the repo and a role binding
// of the client's own identity on the group. Every call is valid, so any answer that is not OK is an error.
// The working set stays bounded (at most one round's resources per client), so memory that keeps growing is
// a leak, not data. (The outbox keeps one row per write: it grows in the database, not in the server.)
//
// Every interval: requests, req/s, p50 and p99 of the calls that ended in it, errors, and the server's RSS
// (VmRSS of the node process serving, from /proc). Memory drift compares the mean RSS of the first third of
// the samples taken after the warm-up with the mean of the last third: one sample swings by tens of MB with
// garbage collection, a third of the run does not.
import { loadavg } from "node:os";
import type { DescMethodUnary, MessageInitShape, MessageShape, DescMessage } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import postgres from "postgres";
import { GroupsService } from "../gen/chainguard/platform/iam/v2/groups_pb.js";
import { RelationshipType } from "../gen/chainguard/platform/iam/v2/identities_pb.js";
import { RoleBindingsService } from "../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import { ReposService } from "../gen/chainguard/platform/registry/v2/repos_pb.js";
import { TagsService } from "../gen/chainguard/platform/registry/v2/tags_pb.js";
import { openPostgres } from "../src/db/client.js";
import { identities } from "../src/db/schema/index.js";
import { managedRole } from "../src/iam/managed-roles.js";
import { setLogLevel } from "../src/kernel/log.js";
import { newChildUid } from "../src/kernel/uidp.js";
import { caller, protocols, type Protocol } from "../test/contract/harness.js";
import { ownedOrganization, withScratchDatabase } from "./database.js";
import { closedLoop, percentile, say } from "./load.js";
import { cpuSecondsOf } from "./cpu.js";
import { residentBytes, startApiServer } from "./processes.js";

const ISSUER = "https://bench.soak.invalid";
const DIGEST = `sha256:${"5".repeat(64)}`;

export interface SoakOptions {
  minutes: number;
  /** Concurrent clients, spread over the protocols in turn (at least one per protocol). */
  concurrency: number;
  /** Seconds per reported interval (and per memory sample). */
  intervalSeconds: number;
  /** Seconds before the first memory sample that counts as the start. */
  warmupSeconds: number;
}

const mb = (bytes: number) => (bytes / 2 ** 20).toFixed(1);

interface Interval {
  /** Seconds since the load started, at the end of the interval. */
  at: number;
  seconds: number;
  latencies: number[];
  errors: number;
  rss: number;
  /** The server's CPU seconds (utime + stime, from /proc) over the interval. */
  cpu: number;
}

/** What the run saw: latencies per interval, outcomes per protocol and method, one message per kind of error. */
class Tally {
  readonly intervals: Interval[] = [];
  private current: number[] = [];
  private currentErrors = 0;
  private intervalStart = performance.now();
  readonly started = performance.now();
  /** "<protocol> <method> <outcome>" -> count; the outcome is a code name (OK for success) or "thrown". */
  readonly outcomes = new Map<string, number>();
  readonly samples = new Map<string, string>();
  readonly byProtocol = new Map<Protocol, number[]>();

  record(protocol: Protocol, method: string, outcome: string, ms: number, message?: string): void {
    const key = `${protocol} ${method} ${outcome}`;
    this.outcomes.set(key, (this.outcomes.get(key) ?? 0) + 1);
    if (message !== undefined && !this.samples.has(key)) this.samples.set(key, message);
    this.current.push(ms);
    if (outcome !== "OK") this.currentErrors++;
    let list = this.byProtocol.get(protocol);
    if (!list) this.byProtocol.set(protocol, (list = []));
    list.push(ms);
  }

  /** Closes the current interval with a memory sample of the server and the CPU it used in the interval. */
  close(rss: number, cpu: number): Interval {
    const now = performance.now();
    const interval = {
      at: (now - this.started) / 1000,
      seconds: (now - this.intervalStart) / 1000,
      latencies: this.current.sort((a, b) => a - b),
      errors: this.currentErrors,
      rss,
      cpu,
    };
    this.intervals.push(interval);
    this.current = [];
    this.currentErrors = 0;
    this.intervalStart = now;
    return interval;
  }
}

interface Client {
  protocol: Protocol;
  /** The identity this client binds on its groups. */
  robot: string;
  send<I extends DescMessage, O extends DescMessage>(method: DescMethodUnary<I, O>, request: MessageInitShape<I>): Promise<MessageShape<O> | undefined>;
}

function clientOf(protocol: Protocol, baseUrl: string, auth: Record<string, string>, robot: string, tally: Tally): Client {
  const call = caller(protocol, baseUrl);
  return {
    protocol,
    robot,
    async send(method, request) {
      const t0 = performance.now();
      try {
        const out = await call(method, request, auth);
        const ms = performance.now() - t0;
        if (out.error) tally.record(protocol, method.name, Code[out.error.code], ms, out.error.message);
        else tally.record(protocol, method.name, "OK", ms);
        return out.message;
      } catch (err) {
        // No status at all: a connection failure, or a REST body that is not JSON.
        tally.record(protocol, method.name, "thrown", performance.now() - t0, String(err));
        return undefined;
      }
    },
  };
}

/**
 * One round of a client: everything it creates is deleted before the round ends, in reverse order, whatever
 * failed in between. 19 calls when all goes well: 9 writes, 10 reads.
 */
async function round(c: Client, org: string, n: number): Promise<void> {
  const undo: (() => Promise<unknown>)[] = [];
  try {
    const group = await c.send(GroupsService.method.createGroup, { parent: org, group: { name: `soak ${n}`, description: "created" } });
    if (!group) return;
    undo.push(() => c.send(GroupsService.method.deleteGroup, { uid: group.uid }));
    await c.send(GroupsService.method.getGroup, { uid: group.uid });
    await c.send(GroupsService.method.updateGroup, { group: { uid: group.uid, description: `round ${n}` }, updateMask: { paths: ["description"] } });

    const repo = await c.send(ReposService.method.createRepo, { parent: group.uid, repo: { name: `soak/app-${n}` } });
    if (repo) {
      undo.push(() => c.send(ReposService.method.deleteRepo, { uid: repo.uid }));
      await c.send(ReposService.method.updateRepo, { repo: { uid: repo.uid, description: `round ${n}` }, updateMask: { paths: ["description"] } });
      await c.send(ReposService.method.getRepo, { uid: repo.uid });
      const tag = await c.send(TagsService.method.createTag, { parent: repo.uid, tag: { name: `v${n}`, digest: DIGEST } });
      if (tag) {
        undo.push(() => c.send(TagsService.method.deleteTag, { uid: tag.uid }));
        await c.send(TagsService.method.getTag, { uid: tag.uid });
        await c.send(TagsService.method.listTags, { uidp: { childrenOf: repo.uid }, pageSize: 10 });
      }
      await c.send(ReposService.method.listRepos, { uidp: { childrenOf: group.uid } });
    }

    const binding = await c.send(RoleBindingsService.method.createRoleBinding, {
      parent: group.uid,
      roleBinding: { identityUid: c.robot, roleUid: managedRole("viewer").uid },
    });
    if (binding) {
      undo.push(() => c.send(RoleBindingsService.method.deleteRoleBinding, { uid: binding.uid }));
      await c.send(RoleBindingsService.method.updateRoleBinding, {
        roleBinding: { uid: binding.uid, roleUid: managedRole("editor").uid },
        updateMask: { paths: ["role_uid"] },
      });
      await c.send(RoleBindingsService.method.getRoleBinding, { uid: binding.uid });
      await c.send(RoleBindingsService.method.listRoleBindings, { uidp: { childrenOf: group.uid } });
    }
    await c.send(GroupsService.method.listGroups, { uidp: { childrenOf: org }, pageSize: 20 });
  } finally {
    for (const u of undo.reverse()) await u();
  }
}

export async function benchSoak(opts: SoakOptions): Promise<void> {
  if (opts.concurrency < protocols.length) throw new Error(`the soak needs at least ${protocols.length} clients, one per protocol`);
  setLogLevel("warn");
  await withScratchDatabase("bench_soak", (url) => soakOn(url, opts));
}

async function soakOn(url: string, opts: SoakOptions): Promise<void> {
  const seconds = opts.minutes * 60;
  const database = await openPostgres(url, { max: 2 });
  const { org, auth } = await ownedOrganization(database.db, ISSUER, seconds + 3600);
  // One identity per client, in the organization, for the role bindings it creates and deletes.
  const robots = Array.from({ length: opts.concurrency }, (_, i) => ({
    uid: newChildUid(org),
    parentUid: org,
    name: `robot ${i}`,
    relationship: { claimMatch: { issuer: "https://ci.invalid", subject: `robot-${i}` } },
    relationshipType: RelationshipType.CLAIM_MATCH,
    issuer: "https://ci.invalid",
    subject: `robot-${i}`,
  }));
  await database.db.insert(identities).values(robots);
  await database.close();

  const api = await startApiServer({ DATABASE_URL: url, ISSUER_URL: ISSUER, SERVER_MODE: "production", LOG_LEVEL: "warn" });
  try {
    const baseUrl = `http://127.0.0.1:${api.port}`;
    const tally = new Tally();
    const clients = robots.map((r, i) => clientOf(protocols[i % protocols.length]!, baseUrl, auth, r.uid, tally));
    const rounds = clients.map(() => 0);
    const startRss = residentBytes(api.serverPid);
    const loadStart = loadavg()[0]!;
    say(
      `soak: ${opts.minutes} min, ${opts.concurrency} clients (${protocols.join(", ")} in turn), interval ${opts.intervalSeconds}s, ` +
        `warm-up ${opts.warmupSeconds}s; server pid ${api.serverPid}, RSS ${mb(startRss)} MB idle; load average ${loadStart.toFixed(2)}`,
    );
    const report = (i: Interval) =>
      say(
        `  ${i.at.toFixed(0).padStart(5)}s  ${String(i.latencies.length).padStart(6)} calls  ${(i.latencies.length / i.seconds).toFixed(0).padStart(4)}/s  ` +
          `p50 ${percentile(i.latencies, 50).toFixed(1)} ms  p99 ${percentile(i.latencies, 99).toFixed(1)} ms  errors ${i.errors}  RSS ${mb(i.rss)} MB  CPU ${cpuPerCall(i)} ms/call`,
      );
    // The server's CPU per interval, read beside its memory.
    let cpuBefore = cpuSecondsOf(api.serverPid);
    const sampleServer = (): [number, number] => {
      const cpu = cpuSecondsOf(api.serverPid);
      const used = cpu - cpuBefore;
      cpuBefore = cpu;
      return [residentBytes(api.serverPid), used];
    };
    const ticker = setInterval(() => report(tally.close(...sampleServer())), opts.intervalSeconds * 1000);
    const elapsed = await closedLoop(opts.concurrency, seconds, (w) => round(clients[w]!, org, ++rounds[w]!));
    clearInterval(ticker);
    // The last, partial interval (the rounds in flight at the deadline finish in it), sampled as the load stops.
    report(tally.close(...sampleServer()));
    const loadEnd = loadavg()[0]!;
    printSummary(opts, tally, { elapsed, rounds: rounds.reduce((a, b) => a + b, 0), loadStart, loadEnd, idleRss: startRss });
    console.log(`left in the database after the load (the working set is bounded when all are 0): ${await leftBehind(url, org)}`);
  } finally {
    await api.stop();
  }
}

/** What the rounds left behind: resources under the organization besides its owner's binding and the robots. */
async function leftBehind(url: string, org: string): Promise<string> {
  const sqlc = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const [row] = await sqlc<{ groups: string; repos: string; tags: string; bindings: string }[]>`
      select (select count(*) from groups where uid like ${org + "/%"})::text as groups,
             (select count(*) from repos)::text as repos,
             (select count(*) from tags)::text as tags,
             (select count(*) from role_bindings where group_uid <> ${org})::text as bindings`;
    return `${row!.groups} groups, ${row!.repos} repos, ${row!.tags} tags, ${row!.bindings} role bindings`;
  } finally {
    await sqlc.end({ timeout: 5 });
  }
}

/** The server's CPU per call over an interval, in ms. */
function cpuPerCall(i: Interval): string {
  return ((i.cpu * 1000) / Math.max(1, i.latencies.length)).toFixed(3);
}

function printSummary(opts: SoakOptions, tally: Tally, run: { elapsed: number; rounds: number; loadStart: number; loadEnd: number; idleRss: number }): void {
  const all = tally.intervals.flatMap((i) => i.latencies).sort((a, b) => a - b);
  const errors = [...tally.outcomes].filter(([k]) => !k.endsWith(" OK"));
  const errorCount = errors.reduce((a, [, n]) => a + n, 0);
  console.log(
    `\nSoak, ${opts.concurrency} clients over ${protocols.length} protocols, ${(run.elapsed / 60).toFixed(1)} min, node ${process.version}, ` +
      `${new Date().toISOString()}, load average ${run.loadStart.toFixed(2)} at the start and ${run.loadEnd.toFixed(2)} at the end\n`,
  );
  console.log(
    `${all.length} calls in ${run.rounds} rounds (${(all.length / run.elapsed).toFixed(0)}/s), ${errorCount} errors; ` +
      `p50 ${percentile(all, 50).toFixed(1)} ms, p99 ${percentile(all, 99).toFixed(1)} ms; ` +
      `server CPU ${((tally.intervals.reduce((a, i) => a + i.cpu, 0) * 1000) / Math.max(1, all.length)).toFixed(3)} ms per call\n`,
  );
  console.log(
    "| interval ends at | calls | calls/s | p50 ms | p99 ms | errors | server RSS MB | server CPU ms/call |\n|---:|---:|---:|---:|---:|---:|---:|---:|",
  );
  for (const i of tally.intervals) {
    const warm = i.at < opts.warmupSeconds ? " (warm-up)" : "";
    console.log(
      `| ${i.at.toFixed(0)} s${warm} | ${i.latencies.length} | ${(i.latencies.length / i.seconds).toFixed(0)} | ${percentile(i.latencies, 50).toFixed(1)} | ` +
        `${percentile(i.latencies, 99).toFixed(1)} | ${i.errors} | ${mb(i.rss)} | ${cpuPerCall(i)} |`,
    );
  }
  console.log("\n| protocol | calls | p50 ms | p99 ms | errors |\n|---|---:|---:|---:|---:|");
  for (const p of protocols) {
    const l = (tally.byProtocol.get(p) ?? []).sort((a, b) => a - b);
    const e = errors.filter(([k]) => k.startsWith(`${p} `)).reduce((a, [, n]) => a + n, 0);
    console.log(`| ${p} | ${l.length} | ${percentile(l, 50).toFixed(1)} | ${percentile(l, 99).toFixed(1)} | ${e} |`);
  }
  const byCode = new Map<string, number>();
  for (const [k, n] of errors) byCode.set(k.slice(k.lastIndexOf(" ") + 1), (byCode.get(k.slice(k.lastIndexOf(" ") + 1)) ?? 0) + n);
  console.log(`\nerrors by code: ${byCode.size ? [...byCode].map(([c, n]) => `${c} ${n}`).join(", ") : "none"}`);
  for (const [k, n] of errors) console.log(`  ${k}: ${n} (first: ${tally.samples.get(k)?.slice(0, 200)})`);

  const counted = tally.intervals.filter((i) => i.at >= opts.warmupSeconds);
  console.log(`\nserver RSS: ${mb(run.idleRss)} MB idle before the load`);
  if (counted.length >= 3) {
    const third = Math.floor(counted.length / 3);
    const mean = (xs: readonly { rss: number }[]) => xs.reduce((a, x) => a + x.rss, 0) / xs.length;
    const early = mean(counted.slice(0, third));
    const late = mean(counted.slice(-third));
    const drift = ((late - early) / early) * 100;
    const first = counted[0]!;
    const last = counted[counted.length - 1]!;
    console.log(
      `server RSS after the ${opts.warmupSeconds}s warm-up: mean ${mb(early)} MB over the first third of the samples, ${mb(late)} MB over the last ` +
        `third: drift ${drift >= 0 ? "+" : ""}${drift.toFixed(1)}% (goal: under 10%); first sample ${mb(first.rss)} MB at ${first.at.toFixed(0)} s, ` +
        `last ${mb(last.rss)} MB at ${last.at.toFixed(0)} s; min ${mb(Math.min(...counted.map((i) => i.rss)))} MB, max ${mb(Math.max(...counted.map((i) => i.rss)))} MB`,
    );
  } else {
    console.log(`no memory drift: the run is too short for three samples after the ${opts.warmupSeconds}s warm-up`);
  }
}
