// The registry's data plane (OCI Distribution under /v2/) against the CNCF Distribution registry (Debian's
// docker-registry, 2.8), with the same client (Debian's skopeo), in one run:
//   - push and pull of a multi-layer image of --mb MB (default 100, seven layers), `skopeo copy` from and to
//     an OCI layout, --rounds times (default 9);
//   - push and pull of --images small images (default 200: one layer of 4 KiB each, all tags of one repo),
//     `skopeo sync` from and to a tree of dir-format images (one skopeo process for all of them),
//     --small-rounds times (default 3);
//   - memory in the blob size: the peak RSS of each server while one single-layer image of mb/10, mb and 5 mb
//     MB (or the sizes --memory-mb names) is pushed and then pulled.
// Rounds are interleaved (each operation on every server, which goes first alternating by round), each
// round into new repos; medians over the rounds. Per operation: MB/s (bytes of blobs and manifests over wall
// time), each server's CPU per MB from /proc/<pid>/stat, user and system apart (for this server, its
// PostgreSQL backends' too, apart), its peak RSS (VmHWM, reset through /proc/<pid>/clear_refs before each
// operation), and skopeo's CPU, user and system (the children this process reaped). The verdict is the ratio
// of the two servers' MB/s within each round (the two runs of a round are adjacent in time, so the machine's
// load moves both), printed as min / median / max over the rounds with the rounds at or above 1.00x: one
// noisy round does not decide it. Distribution runs from a generated configuration:
// filesystem storage in a temporary directory, loopback port, no authentication, no TLS. This server runs
// on a scratch PostgreSQL database, its blobs in its data directory, in development mode (its issuer, where
// the registry token flow points clients, is its own plain-http loopback address, which production refuses);
// skopeo logs in as `_token` with an owner's access token. With BENCH_BEFORE_ROOT=<checkout>, that checkout's
// server (the code before a change) runs too, on the same database, in the same rounds: before and after in one
// run, each against Distribution.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { openPostgres } from "../src/db/client.js";
import { setLogLevel } from "../src/kernel/log.js";
import { dirImage, ociLayout, type BuiltImage } from "../test/support/oci-layout.js";
import { distributionInstalled, freePort, skopeo, skopeoInstalled, startDistribution, type Skopeo } from "../test/support/skopeo.js";
import { createKeyStore, mintToken } from "../src/kernel/auth/index.js";
import { BENCH_APPLICATION, backendsCpu, metered, processCpu, userSys, type CpuMeter } from "./cpu.js";
import { ownedOrganization, withScratchDatabase } from "./database.js";
import { median, say, textTable } from "./load.js";
import { summarize } from "./profile.js";
import { startApiServer } from "./processes.js";

export interface OciBenchOptions {
  /** Rounds of the multi-layer image (push and pull on both servers). */
  rounds: number;
  /** Rounds of the small images. */
  smallRounds: number;
  /** Size of the multi-layer image, in MB; the memory curve pushes mb/10, mb and 5 mb. */
  mb: number;
  /** The single layers of the memory curve, in MB (default mb/10, mb and 5 mb). */
  memoryMb?: number[];
  /** Small images pushed and pulled per round. */
  images: number;
  /** Runs this server under `node --cpu-prof` and prints where its main thread spent each operation. */
  profile?: boolean;
  /** Functions listed per operation with --profile. */
  top?: number;
}

const MB = 1_000_000;
/** The multi-layer image's layers, as shares of its size. */
const LAYER_SHARES = [0.4, 0.25, 0.15, 0.1, 0.05, 0.03, 0.02];
const SMALL_LAYER = 4096;

interface Target {
  name: string;
  host: string;
  /** The repository namespace images go under: this server's organization uid, "bench" for Distribution. */
  namespace: string;
  /** Begins its repos' names: the servers of this project share one database and organization. */
  prefix: string;
  pid: number;
  meters: CpuMeter[];
}

interface Sample {
  op: string;
  round: number;
  target: string;
  bytes: number;
  seconds: number;
  cpu: Record<string, number>;
  /** The server's user and system CPU seconds. */
  serverUser: number;
  serverSys: number;
  /** skopeo's user and system CPU seconds. */
  clientUser: number;
  clientSys: number;
  peakRss: number;
}


/** Resets a process's peak RSS (VmHWM) to its current RSS. */
function resetPeak(pid: number): void {
  writeFileSync(`/proc/${pid}/clear_refs`, "5");
}

function statusKib(pid: number, field: "VmHWM" | "VmRSS"): number {
  const kib = new RegExp(`^${field}:\\s+(\\d+) kB$`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
  if (kib === undefined) throw new Error(`no ${field} for process ${pid}`);
  return Number(kib) * 1024;
}

const imageBytes = (im: BuiltImage) => im.manifest.size + im.config.size + im.layers.reduce((s, l) => s + l.size, 0);
const mib = (bytes: number) => (bytes / (1 << 20)).toFixed(0);

/** The servers of this project a run measures: this checkout's, and with BENCH_BEFORE_ROOT that checkout's. */
export interface OciServers {
  /** The organization both push to and pull from, and its owner. */
  org: string;
  owner: string;
  /** This checkout's server, its port (its address is its issuer) and an access token of the owner. */
  api: Awaited<ReturnType<typeof startApiServer>>;
  port: number;
  token: string;
  /** BENCH_BEFORE_ROOT's server (the code before a change), with a token of its own issuer. */
  before?: { server: Awaited<ReturnType<typeof startApiServer>>; port: number; token: string };
}

/**
 * Starts this checkout's server in development mode on the scratch database `url` (its issuer, to which the
 * registry token flow points clients, is its own plain-http loopback address), makes an organization with an
 * owner and mints the owner a token; with BENCH_BEFORE_ROOT=<checkout>, that checkout's server too, on the same
 * database, with a token of its own issuer, so that before and after are measured in the same rounds.
 * `nodeArgs`, `beforeNodeArgs`: node's flags for each (a profiler's). The caller stops both.
 */
export async function startOciServers(url: string, opts: { nodeArgs?: string[]; beforeNodeArgs?: string[] } = {}): Promise<OciServers> {
  const port = await freePort();
  const issuer = `http://127.0.0.1:${port}`;
  const beforeRoot = process.env.BENCH_BEFORE_ROOT;
  const beforePort = beforeRoot ? await freePort() : 0;
  const beforeIssuer = `http://127.0.0.1:${beforePort}`;
  const database = await openPostgres(url, { max: 1 });
  let org: string, owner: string, token: string, beforeToken: string;
  try {
    const owned = await ownedOrganization(database.db, issuer, 6 * 3600);
    ({ org, owner } = owned);
    token = owned.auth.authorization!.replace(/^Bearer /, "");
    beforeToken = beforeRoot ? (await mintToken(await createKeyStore(database.db), { issuer: beforeIssuer, subject: owner, audience: beforeIssuer, ttlSeconds: 6 * 3600 })).token : "";
  } finally {
    await database.close();
  }
  const env = { DATABASE_URL: url, SERVER_MODE: "development", LOG_LEVEL: "warn", METRICS_ADDR: "off" };
  const api = await startApiServer({ ...env, ISSUER_URL: issuer }, { quiet: true, port, ...(opts.nodeArgs ? { nodeArgs: opts.nodeArgs } : {}) });
  if (!beforeRoot) return { org, owner, api, port, token };
  try {
    const server = await startApiServer({ ...env, ISSUER_URL: beforeIssuer }, { quiet: true, port: beforePort, root: beforeRoot, ...(opts.beforeNodeArgs ? { nodeArgs: opts.beforeNodeArgs } : {}) });
    return { org, owner, api, port, token, before: { server, port: beforePort, token: beforeToken } };
  } catch (err) {
    await api.stop();
    throw err;
  }
}

export async function benchOci(opts: OciBenchOptions): Promise<void> {
  if (!skopeoInstalled() || !distributionInstalled()) {
    throw new Error("the oci benchmark needs Debian's skopeo and docker-registry (apt-get install skopeo docker-registry; .ci/run installs them)");
  }
  setLogLevel("warn");
  await withScratchDatabase("bench_oci", (url) => measureOn(url, opts));
}

async function measureOn(url: string, opts: OciBenchOptions): Promise<void> {
  const cleanups: (() => Promise<unknown> | void)[] = [];
  const work = mkdtempSync(join(tmpdir(), "bench-oci-"));
  cleanups.push(() => rmSync(work, { recursive: true, force: true }));
  try {
    // --- fixtures, the same bytes on every run -------------------------------------------------------------
    const t0 = performance.now();
    const layoutDir = join(work, "layout");
    const layout = ociLayout(layoutDir, "bench-oci", { gzipLevel: 0 });
    const big = await layout.addImage("big", { architecture: "amd64", layers: LAYER_SHARES.map((s) => Math.round(s * opts.mb * MB)) });
    const memorySizes = opts.memoryMb ?? [opts.mb / 10, opts.mb, opts.mb * 5];
    const single: BuiltImage[] = [];
    for (const size of memorySizes) single.push(await layout.addImage(`single-${size}`, { architecture: "amd64", layers: [Math.round(size * MB)] }));
    const tree = join(work, "small");
    let smallRepo = "small-r0";
    mkdirSync(join(tree, "images"), { recursive: true });
    let smallBytes = 0;
    for (let i = 0; i < opts.images; i++) {
      const im = await dirImage(join(tree, "images", `${smallRepo}:${String(i).padStart(4, "0")}`), `bench-oci-small-${i}`, { architecture: "amd64", layers: [SMALL_LAYER] });
      smallBytes += imageBytes(im);
    }
    say(`built the images in ${((performance.now() - t0) / 1000).toFixed(1)} s: ${mib(imageBytes(big))} MiB in ${big.layers.length} layers; ${opts.images} small images of ${(smallBytes / opts.images / 1024).toFixed(1)} KiB; single layers of ${memorySizes.join(", ")} MB`);
    const renameSmall = (to: string) => {
      for (const name of readdirSync(join(tree, "images"))) renameSync(join(tree, "images", name), join(tree, "images", name.replace(/^[^:]+/, to)));
      smallRepo = to;
    };

    // --- the two registries ---------------------------------------------------------------------------------
    const admin = postgres(url, { max: 1, onnotice: () => {}, connection: { application_name: BENCH_APPLICATION } });
    cleanups.push(() => admin.end({ timeout: 5 }));
    const profileDir = opts.profile ? mkdtempSync(join(tmpdir(), "bench-oci-prof-")) : undefined;
    const servers = await startOciServers(url, profileDir ? { nodeArgs: ["--cpu-prof", `--cpu-prof-dir=${profileDir}`] } : {});
    const { org, token, port, api } = servers;
    const before = servers.before?.server;
    const beforePort = servers.before?.port ?? 0;
    const beforeToken = servers.before?.token ?? "";
    let apiStopped = false;
    cleanups.push(() => (apiStopped ? undefined : api.stop()));
    if (before) cleanups.push(() => before.stop());
    /** The windows of each operation on this server, in microseconds of the monotonic clock (the profile's). */
    const windows: { op: string; from: number; to: number }[] = [];
    const now = () => Number(process.hrtime.bigint() / 1000n);
    const dist = await startDistribution();
    cleanups.push(() => dist.stop());
    const client: Skopeo = skopeo();
    cleanups.push(() => client.close());
    await client.login(`127.0.0.1:${port}`, "_token", token);
    if (before) await client.login(`127.0.0.1:${beforePort}`, "_token", beforeToken);
    const targets: Target[] = [
      {
        name: "this server",
        host: `127.0.0.1:${port}`,
        namespace: org,
        prefix: "",
        pid: api.serverPid,
        meters: [processCpu("server", api.serverPid), backendsCpu("PostgreSQL", admin, { not: BENCH_APPLICATION })],
      },
      ...(before
        ? [{ name: "before", host: `127.0.0.1:${beforePort}`, namespace: org, prefix: "before-", pid: before.serverPid, meters: [processCpu("server", before.serverPid), backendsCpu("PostgreSQL", admin, { not: BENCH_APPLICATION })] }]
        : []),
      { name: "Distribution 2.8", host: dist.host, namespace: "bench", prefix: "", pid: dist.pid, meters: [processCpu("server", dist.pid)] },
    ];
    const distribution = targets[targets.length - 1]!;

    const samples: Sample[] = [];
    const run = async (op: string, round: number, target: Target, bytes: number, body: () => Promise<unknown>) => {
      client.forgetBlobLocations();
      resetPeak(target.pid);
      const clientStart = userSys("self", true);
      const serverStart = userSys(target.pid);
      const start = performance.now();
      const from = now();
      const { cpu } = await metered(target.meters, body);
      if (target.pid === api.serverPid) windows.push({ op: op.replace(/\d+ MB$/, "single layer"), from, to: now() });
      const seconds = (performance.now() - start) / 1000;
      const [clientEnd, serverEnd] = [userSys("self", true), userSys(target.pid)];
      const sample: Sample = {
        op,
        round,
        target: target.name,
        bytes,
        seconds,
        cpu,
        serverUser: serverEnd.user - serverStart.user,
        serverSys: serverEnd.sys - serverStart.sys,
        clientUser: clientEnd.user - clientStart.user,
        clientSys: clientEnd.sys - clientStart.sys,
        peakRss: statusKib(target.pid, "VmHWM"),
      };
      samples.push(sample);
      say(`  ${op}, ${target.name}: ${(bytes / MB / seconds).toFixed(1)} MB/s, server CPU ${(cpu.server! * 1000).toFixed(0)} ms, peak RSS ${mib(sample.peakRss)} MiB`);
      return sample;
    };
    const pulled = join(work, "pulled");
    const cleanPulled = () => rmSync(pulled, { recursive: true, force: true });

    for (let round = 1; round <= opts.rounds; round++) {
      say(`round ${round} of ${opts.rounds}, ${opts.mb} MB image (load average ${loadavg()[0]!.toFixed(1)})`);
      const order = round % 2 ? targets : [...targets].reverse();
      const repo = (t: Target) => `${t.host}/${t.namespace}/${t.prefix}big-r${round}`;
      for (const t of order) await run("push big", round, t, imageBytes(big), () => client.copy(`oci:${layoutDir}:big`, `docker://${repo(t)}:big`));
      for (const t of order) {
        await run("pull big", round, t, imageBytes(big), () => client.copy(`docker://${repo(t)}:big`, `oci:${pulled}:big`));
        cleanPulled();
      }
    }
    for (let round = 1; round <= opts.smallRounds; round++) {
      say(`round ${round} of ${opts.smallRounds}, ${opts.images} small images (load average ${loadavg()[0]!.toFixed(1)})`);
      const order = round % 2 ? targets : [...targets].reverse();
      const push = ["sync", "--src", "dir", "--dest", "docker", "--dest-tls-verify=false", "--dest-authfile", client.authfile];
      const pull = ["sync", "--src", "docker", "--dest", "dir", "--src-tls-verify=false", "--src-authfile", client.authfile];
      for (const t of order) {
        renameSmall(`${t.prefix}small-r${round}`);
        await run("push small", round, t, smallBytes, () => client.run([...push, join(tree, "images"), `${t.host}/${t.namespace}`]));
      }
      for (const t of order) {
        await run("pull small", round, t, smallBytes, () => client.run([...pull, `${t.host}/${t.namespace}/${t.prefix}small-r${round}`, pulled]));
        const got = readdirSync(pulled, { recursive: true }).filter((p) => String(p).endsWith("manifest.json")).length;
        if (got !== opts.images) throw new Error(`pull small from ${t.name}: ${got} images of ${opts.images}`);
        cleanPulled();
      }
    }

    // --- memory in the blob size ----------------------------------------------------------------------------
    say("memory: single-layer images");
    const rssBefore = Object.fromEntries(targets.map((t) => [t.name, statusKib(t.pid, "VmRSS")]));
    const memory: { size: number; target: string; push: number; pull: number }[] = [];
    for (const [i, size] of memorySizes.entries()) {
      const tag = `single-${size}`;
      for (const t of i % 2 ? [...targets].reverse() : targets) {
        const push = await run(`push ${size} MB`, 0, t, imageBytes(single[i]!), () => client.copy(`oci:${layoutDir}:${tag}`, `docker://${t.host}/${t.namespace}/${t.prefix}single:${tag}`));
        const pull = await run(`pull ${size} MB`, 0, t, imageBytes(single[i]!), () => client.copy(`docker://${t.host}/${t.namespace}/${t.prefix}single:${tag}`, `oci:${pulled}:${tag}`));
        cleanPulled();
        memory.push({ size, target: t.name, push: push.peakRss, pull: pull.peakRss });
      }
    }

    // --- report ---------------------------------------------------------------------------------------------
    console.log(
      `\n## OCI push and pull: this server against Distribution 2.8 (${new Date().toISOString().slice(0, 16)}Z, load average ${loadavg()
        .map((l) => l.toFixed(1))
        .join(" ")}; ${opts.rounds} interleaved rounds of the ${opts.mb} MB image, ${opts.smallRounds} of ${opts.images} small images; medians)\n`,
    );
    console.log("skopeo copy (multi-layer) and skopeo sync (small images) on loopback; Distribution: filesystem storage in a temporary directory, no authentication, no TLS; this server: development mode, PostgreSQL, filesystem blob store, skopeo logged in as _token.\n");
    const ops = ["push big", "pull big", "push small", "pull small"];
    const rows: string[][] = [];
    const ratio: string[][] = [];
    const of = (op: string, target: string) => samples.filter((s) => s.op === op && s.target === target);
    const cell = (n: number) => (Number.isFinite(n) ? (n >= 100 ? n.toFixed(0) : n.toPrecision(3)) : "");
    const x = (n: number) => `${n.toFixed(2)}×`;
    for (const op of ops.filter((o) => samples.some((s) => s.op === o))) {
      const per: Record<string, { mbs: number; cpu: number; user: number; sys: number; pg: number; client: number; clientUser: number; clientSys: number; rss: number; ips: number }> = {};
      for (const t of targets) {
        const s = of(op, t.name);
        const perMb = (f: (x: Sample) => number) => median(s.map((x) => (f(x) * 1000) / (x.bytes / MB)));
        per[t.name] = {
          mbs: median(s.map((x) => x.bytes / MB / x.seconds)),
          cpu: perMb((x) => x.cpu.server!),
          user: perMb((x) => x.serverUser),
          sys: perMb((x) => x.serverSys),
          pg: t.meters.length > 1 ? perMb((x) => x.cpu.PostgreSQL!) : NaN,
          client: perMb((x) => x.clientUser + x.clientSys),
          clientUser: perMb((x) => x.clientUser),
          clientSys: perMb((x) => x.clientSys),
          rss: Math.max(...s.map((x) => x.peakRss)),
          ips: op.endsWith("small") ? median(s.map((x) => opts.images / x.seconds)) : NaN,
        };
        const p = per[t.name]!;
        const perImage = op.endsWith("small") ? smallBytes / MB / opts.images : NaN;
        rows.push([op, t.name, cell(p.mbs), cell(p.ips), `${cell(p.cpu)} (${cell(p.user)} + ${cell(p.sys)})`, cell(p.pg), `${cell(p.client)} (${cell(p.clientUser)} + ${cell(p.clientSys)})`, cell(p.cpu * perImage), cell(p.pg * perImage), mib(p.rss)]);
      }
      // Per round: a server's MB/s over Distribution's, and its server CPU per MB over Distribution's.
      for (const t of targets.slice(0, -1)) {
        const [a, b] = [of(op, t.name), of(op, distribution.name)];
        const rounds = a.map((s) => [s, b.find((o) => o.round === s.round)] as const).filter((p): p is readonly [Sample, Sample] => p[1] !== undefined);
        const speed = rounds.map(([s, o]) => o.seconds / s.seconds);
        const cpu = rounds.map(([s, o]) => s.cpu.server! / o.cpu.server!);
        const spread = (v: number[]) => `${x(Math.min(...v))} / ${x(median(v))} / ${x(Math.max(...v))}`;
        const pa = per[t.name]!;
        const pb = per[distribution.name]!;
        ratio.push([t === targets[0] ? op : `${op} (${t.name})`, `${rounds.length}`, spread(speed), `${speed.filter((r) => r >= 1).length} of ${speed.length}`, spread(cpu), x((pa.cpu + (Number.isFinite(pa.pg) ? pa.pg : 0)) / pb.cpu), x(pa.client / pb.client), x(pa.rss / pb.rss)]);
      }
    }
    console.log(textTable(["operation", "server", "MB/s", "images/s", "server CPU ms/MB (user + sys)", "PostgreSQL CPU ms/MB", "skopeo CPU ms/MB (user + sys)", "server CPU ms/image", "PostgreSQL CPU ms/image", "peak RSS MiB"], rows));
    console.log("\nThis server (and the one before, with BENCH_BEFORE_ROOT) / Distribution, per round (min / median / max over the rounds; CPU: the servers' own, then with PostgreSQL and skopeo's, medians):\n");
    console.log(textTable(["operation", "rounds", "MB/s", "rounds ≥ 1.00×", "server CPU/MB", "server+PostgreSQL CPU/MB", "skopeo CPU/MB", "peak RSS"], ratio));
    console.log(`\nPeak RSS (MiB) by blob size, one single-layer image pushed then pulled (RSS before: ${targets.map((t) => `${t.name} ${mib(rssBefore[t.name]!)}`).join(", ")}):\n`);
    console.log(
      textTable(
        ["layer", ...targets.flatMap((t) => [`${t.name} push`, `${t.name} pull`])],
        memorySizes.map((size) => [`${size} MB`, ...targets.flatMap((t) => {
          const m = memory.find((x) => x.size === size && x.target === t.name)!;
          return [mib(m.push), mib(m.pull)];
        })]),
      ),
    );
    if (profileDir) {
      await api.stop();
      apiStopped = true;
      reportProfile(profileDir, windows, opts.top ?? 12);
    }
  } finally {
    for (const c of cleanups.reverse()) await c();
  }
}

/** This server's main thread per operation, summed over the operation's windows: self time by package and function. */
function reportProfile(dir: string, windows: readonly { op: string; from: number; to: number }[], top: number): void {
  // The server's profile is the largest (its tsx launcher writes one too).
  const [file] = readdirSync(dir)
    .filter((f) => f.endsWith(".cpuprofile"))
    .map((f) => join(dir, f))
    .sort((a, b) => readFileSync(b).length - readFileSync(a).length);
  if (!file) return void say(`no CPU profile written in ${dir}`);
  const profile = JSON.parse(readFileSync(file, "utf8")) as Parameters<typeof summarize>[0];
  console.log(`\nThis server under --cpu-prof (${file}): main thread, not idle, by operation:`);
  for (const op of [...new Set(windows.map((w) => w.op))]) {
    const sum = { total: 0, byPackage: new Map<string, number>(), byFunction: new Map<string, number>() };
    for (const w of windows.filter((x) => x.op === op)) {
      const s = summarize(profile, w.from, w.to);
      sum.total += s.total;
      for (const [k, v] of s.byPackage) sum.byPackage.set(k, (sum.byPackage.get(k) ?? 0) + v);
      for (const [k, v] of s.byFunction) sum.byFunction.set(k, (sum.byFunction.get(k) ?? 0) + v);
    }
    const pct = (ms: number) => `${((ms / sum.total) * 100).toFixed(1).padStart(5)}%`;
    const sorted = (m: Map<string, number>) => [...m].sort((a, b) => b[1] - a[1]).slice(0, top);
    console.log(`\n${op}: ${(sum.total / 1000).toFixed(2)} s sampled; by package: ${sorted(sum.byPackage).map(([k, v]) => `${k} ${pct(v).trim()}`).join(", ")}`);
    for (const [fn, ms] of sorted(sum.byFunction)) console.log(`  ${pct(ms)}  ${fn}`);
  }
}
