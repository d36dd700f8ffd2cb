// The large pull alone, to see where a client's CPU goes against this server and against the CNCF Distribution
// registry (Debian's docker-registry, 2.8): the multi-layer image of `oci` (--mb MB, seven layers) is pushed
// once to each, then pulled --rounds times, interleaved (which server goes first alternating by round), by two
// clients: `skopeo copy` of the whole image into an OCI layout, and `curl -o /dev/null` of its largest layer.
// Per pull: wall time, the client's CPU (user and system, the children this process reaped), the server's
// (/proc/<pid>/stat), and the client's own counts from `perf stat` (task clock, context switches, page faults,
// and the system calls read, write, epoll_pwait, futex, nanosleep, all of them); ratios per round, this
// server over Distribution, as min / median / max. Once per server before the rounds: the blob GET's response
// headers (`curl -v`), and, with --strace, `strace -f -c` of one skopeo pull (printed as is).
// With BENCH_BEFORE_ROOT=<checkout>, that checkout's server too, in the same rounds.
import { execFile, spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { setLogLevel } from "../src/kernel/log.js";
import { ociLayout } from "../test/support/oci-layout.js";
import { distributionInstalled, SKOPEO, skopeo, skopeoInstalled, startDistribution } from "../test/support/skopeo.js";
import { withScratchDatabase } from "./database.js";
import { startOciServers } from "./oci.js";
import { median, say, textTable } from "./load.js";
import { userSys } from "./cpu.js";

export interface OciPullBenchOptions {
  rounds: number;
  mb: number;
  /** `strace -f -c` of one skopeo pull per server before the rounds. */
  strace?: boolean;
  /** After the rounds, this many skopeo pulls per server (interleaved) under `perf record`: where its CPU went. */
  perfRecord?: number;
}

const MB = 1_000_000;
const LAYER_SHARES = [0.4, 0.25, 0.15, 0.1, 0.05, 0.03, 0.02];
const PERF_EVENTS = [
  "task-clock",
  "context-switches",
  "cpu-migrations",
  "page-faults",
  "raw_syscalls:sys_enter",
  "syscalls:sys_enter_read",
  "syscalls:sys_enter_write",
  "syscalls:sys_enter_epoll_pwait",
  "syscalls:sys_enter_futex",
  "syscalls:sys_enter_nanosleep",
  "syscalls:sys_enter_recvfrom",
  "syscalls:sys_enter_poll",
];
const SHORT: Record<string, string> = {
  "task-clock": "task ms",
  "context-switches": "ctx sw",
  "cpu-migrations": "migr",
  "page-faults": "faults",
  "raw_syscalls:sys_enter": "syscalls",
  "syscalls:sys_enter_read": "read",
  "syscalls:sys_enter_write": "write",
  "syscalls:sys_enter_epoll_pwait": "epoll",
  "syscalls:sys_enter_futex": "futex",
  "syscalls:sys_enter_nanosleep": "nanosleep",
  "syscalls:sys_enter_recvfrom": "recvfrom",
  "syscalls:sys_enter_poll": "poll",
};

interface Target {
  name: string;
  host: string;
  pid: number;
  /** The image's repository, host excluded. */
  repo: string;
  /** The Authorization header a curl of a blob sends (none for Distribution). */
  authorization?: () => Promise<string>;
}

interface Pull {
  client: "skopeo" | "curl";
  round: number;
  target: string;
  bytes: number;
  seconds: number;
  clientUser: number;
  clientSys: number;
  serverUser: number;
  serverSys: number;
  /** The server's CPU from its threads' schedstat (nanosecond resolution). */
  serverCpu: number;
  perf: Record<string, number>;
}


/** A process's CPU seconds, every live thread's, from /proc/<pid>/task/<tid>/schedstat (nanoseconds). */
function threadsCpu(pid: number): number {
  let ns = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0]);
    } catch {
      // the thread ended meanwhile
    }
  }
  return ns / 1e9;
}


const exec = (cmd: string, args: readonly string[], env?: NodeJS.ProcessEnv) =>
  new Promise<{ stdout: string; stderr: string }>((resolve, reject) => {
    execFile(cmd, args, { env: env ?? process.env, maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(" ")}: ${String(err)} ${String(stderr).slice(-2000)}`));
      else resolve({ stdout: String(stdout), stderr: String(stderr) });
    });
  });

/** `perf stat -x,` output: event name to count. */
function parsePerf(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split("\n")) {
    const f = line.split(",");
    if (f.length < 3) continue;
    const [value, , event] = f;
    if (event && PERF_EVENTS.includes(event)) out[event] = Number(value);
  }
  return out;
}

export async function benchOciPull(opts: OciPullBenchOptions): Promise<void> {
  if (!skopeoInstalled() || !distributionInstalled()) throw new Error("oci-pull needs Debian's skopeo and docker-registry");
  setLogLevel("warn");
  await withScratchDatabase("bench_oci_pull", (url) => measureOn(url, opts));
}

async function measureOn(url: string, opts: OciPullBenchOptions): Promise<void> {
  const cleanups: (() => Promise<unknown> | void)[] = [];
  const work = mkdtempSync(join(tmpdir(), "bench-oci-pull-"));
  cleanups.push(() => rmSync(work, { recursive: true, force: true }));
  try {
    const layoutDir = join(work, "layout");
    const layout = ociLayout(layoutDir, "bench-oci", { gzipLevel: 0 });
    const big = await layout.addImage("big", { architecture: "amd64", layers: LAYER_SHARES.map((s) => Math.round(s * opts.mb * MB)) });
    const imageBytes = big.manifest.size + big.config.size + big.layers.reduce((s, l) => s + l.size, 0);
    const largest = [...big.layers].sort((a, b) => b.size - a.size)[0]!;

    // Under --perf-record, node writes its JIT code's symbols for perf (/tmp/perf-<pid>.map).
    const nodeArgs = opts.perfRecord ? ["--perf-basic-prof-only-functions"] : undefined;
    const servers = await startOciServers(url, { nodeArgs, beforeNodeArgs: nodeArgs });
    const { org, token, port, api } = servers;
    const before = servers.before?.server;
    const beforePort = servers.before?.port ?? 0;
    const beforeToken = servers.before?.token ?? "";
    cleanups.push(() => api.stop());
    if (before) cleanups.push(() => before.stop());
    const dist = await startDistribution();
    cleanups.push(() => dist.stop());
    const client = skopeo();
    cleanups.push(() => client.close());
    await client.login(`127.0.0.1:${port}`, "_token", token);
    if (before) await client.login(`127.0.0.1:${beforePort}`, "_token", beforeToken);
    // A registry token for curl, as skopeo gets one: GET /token with the access token as the Basic password.
    const registryToken = (host: string, tok: string, repo: string) => async () => {
      const res = await fetch(`http://${host}/token?service=${host}&scope=repository:${repo}:pull`, {
        headers: { authorization: `Basic ${Buffer.from(`_token:${tok}`).toString("base64")}` },
      });
      if (!res.ok) throw new Error(`token from ${host}: ${res.status} ${await res.text()}`);
      const body = (await res.json()) as { token?: string; access_token?: string };
      return `Bearer ${body.token ?? body.access_token}`;
    };
    const targets: Target[] = [
      { name: "this server", host: `127.0.0.1:${port}`, pid: api.serverPid, repo: `${org}/big`, authorization: registryToken(`127.0.0.1:${port}`, token, `${org}/big`) },
      ...(before
        ? [{ name: "before", host: `127.0.0.1:${beforePort}`, pid: before.serverPid, repo: `${org}/before-big`, authorization: registryToken(`127.0.0.1:${beforePort}`, beforeToken, `${org}/before-big`) }]
        : []),
      { name: "Distribution 2.8", host: dist.host, pid: dist.pid, repo: "bench/big" },
    ];
    for (const t of targets) await client.copy(`oci:${layoutDir}:big`, `docker://${t.host}/${t.repo}:big`);
    say(`pushed ${(imageBytes / MB).toFixed(0)} MB in ${big.layers.length} layers to each server; the largest layer ${(largest.size / MB).toFixed(0)} MB`);

    // Each server's CPU while nothing is asked of it (its timers and background work), over 3 s.
    {
      const idle0 = targets.map((t) => userSys(t.pid));
      await new Promise((r) => setTimeout(r, 3000));
      const idle = targets.map((t, i) => {
        const u = userSys(t.pid);
        return `${t.name} ${(((u.user + u.sys - idle0[i]!.user - idle0[i]!.sys) * 1000) / 3).toFixed(1)}`;
      });
      console.log(`\nserver CPU while idle, ms per second: ${idle.join(", ")}`);
    }

    // The blob GET's response headers, per server.
    for (const t of targets) {
      const headers = t.authorization ? ["-H", `Authorization: ${await t.authorization()}`] : [];
      const { stderr } = await exec("curl", ["-sv", "-o", "/dev/null", ...headers, `http://${t.host}/v2/${t.repo}/blobs/${largest.digest}`]);
      const lines = stderr.split("\n").filter((l) => l.startsWith("< ")).map((l) => l.slice(2).trim()).filter(Boolean);
      console.log(`\nblob GET headers, ${t.name}:\n  ${lines.join("\n  ")}`);
    }

    // skopeo's environment as test/support/skopeo.ts gives it (its own home, blob-location cache and tmpdir).
    const home = join(client.authfile, "..");
    const skopeoEnv = {
      ...process.env,
      HOME: home,
      XDG_RUNTIME_DIR: home,
      XDG_CONFIG_HOME: join(home, ".config"),
      XDG_DATA_HOME: join(home, "data"),
      _CONTAINERS_ROOTLESS_UID: String(process.getuid?.() || 1000),
      REGISTRY_AUTH_FILE: client.authfile,
    };
    const pulled = join(work, "pulled");
    const skopeoArgs = (t: Target) => ["--insecure-policy", "--tmpdir", join(home, "tmp"), "copy", "--quiet", "--authfile", client.authfile, "--src-tls-verify=false", `docker://${t.host}/${t.repo}:big`, `oci:${pulled}:big`];

    if (opts.strace) {
      for (const t of targets) {
        client.forgetBlobLocations();
        const out = join(work, "strace.txt");
        await exec("strace", ["-f", "-c", "-o", out, SKOPEO, ...skopeoArgs(t)], skopeoEnv);
        rmSync(pulled, { recursive: true, force: true });
        console.log(`\nstrace -f -c of one skopeo pull, ${t.name}:\n${readFileSync(out, "utf8")}`);
        // The sizes of its socket reads and file writes.
        client.forgetBlobLocations();
        // -ff: a file per thread, so no call is split across lines by another thread's.
        const traces = mkdtempSync(join(work, "strace-"));
        await exec("strace", ["-ff", "-tt", "-yy", "-s", "0", "-e", "trace=read,write,pwrite64", "-o", join(traces, "t"), SKOPEO, ...skopeoArgs(t)], skopeoEnv);
        rmSync(pulled, { recursive: true, force: true });
        const text = readdirSync(traces).map((f) => readFileSync(join(traces, f), "utf8")).join("\n");
        rmSync(traces, { recursive: true, force: true });
        console.log(`\nskopeo's reads and writes of one pull, ${t.name}:\n${summarizeIo(text)}\n${socketTimeline(text)}`);
      }
      // The same timeline without strace's cost: skopeo's read(2) calls as perf tracepoints, three pulls per server.
      for (let round = 1; round <= 3; round++) {
        for (const t of round % 2 ? targets : [...targets].reverse()) {
          client.forgetBlobLocations();
          const data = join(work, "reads.data");
          const start = performance.now();
          await exec("perf", ["record", "-q", "-e", "syscalls:sys_enter_read,syscalls:sys_exit_read,syscalls:sys_enter_exit_group", "-o", data, "--", SKOPEO, ...skopeoArgs(t)], skopeoEnv);
          const wall = performance.now() - start;
          rmSync(pulled, { recursive: true, force: true });
          const { stdout } = await exec("perf", ["script", "-i", data, "-F", "tid,time,event,trace"]);
          rmSync(data, { force: true });
          console.log(`\nskopeo's reads by file descriptor (1 MB or more), one pull from ${t.name} (perf record, ${wall.toFixed(0)} ms in all):\n${readTimeline(stdout)}`);
        }
      }
    }

    const pulls: Pull[] = [];
    const perfOut = join(work, "perf.txt");
    const measure = async (clientName: Pull["client"], round: number, t: Target, bytes: number, cmd: string[]) => {
      const c0 = userSys("self", true);
      const s0 = userSys(t.pid);
      const n0 = threadsCpu(t.pid);
      const start = performance.now();
      await exec("perf", ["stat", "-x,", "-o", perfOut, "-e", PERF_EVENTS.join(","), "--", ...cmd], skopeoEnv);
      const seconds = (performance.now() - start) / 1000;
      const [c1, s1, n1] = [userSys("self", true), userSys(t.pid), threadsCpu(t.pid)];
      const pull: Pull = {
        client: clientName,
        round,
        target: t.name,
        bytes,
        seconds,
        clientUser: c1.user - c0.user,
        clientSys: c1.sys - c0.sys,
        serverUser: s1.user - s0.user,
        serverSys: s1.sys - s0.sys,
        serverCpu: n1 - n0,
        perf: parsePerf(readFileSync(perfOut, "utf8")),
      };
      pulls.push(pull);
      say(`  ${clientName}, ${t.name}: ${(bytes / MB / seconds).toFixed(0)} MB/s, client ${(pull.perf["task-clock"] ?? NaN).toFixed(0)} ms, server ${(pull.serverCpu * 1000).toFixed(1)} ms`);
    };
    const loads: number[] = [];
    for (let round = 1; round <= opts.rounds; round++) {
      loads.push(loadavg()[0]!);
      say(`round ${round} of ${opts.rounds} (load average ${loadavg()[0]!.toFixed(1)})`);
      const order = round % 2 ? targets : [...targets].reverse();
      for (const t of order) {
        client.forgetBlobLocations();
        await measure("skopeo", round, t, imageBytes, [SKOPEO, ...skopeoArgs(t)]);
        rmSync(pulled, { recursive: true, force: true });
      }
      for (const t of order) {
        const headers = t.authorization ? ["-H", `Authorization: ${await t.authorization()}`] : [];
        await measure("curl", round, t, largest.size, ["curl", "-sf", "-o", "/dev/null", ...headers, `http://${t.host}/v2/${t.repo}/blobs/${largest.digest}`]);
      }
    }

    const curlArgs = async (t: Target) => ["-sf", "-o", "/dev/null", ...(t.authorization ? ["-H", `Authorization: ${await t.authorization()}`] : []), `http://${t.host}/v2/${t.repo}/blobs/${largest.digest}`];
    if (opts.perfRecord) await profileClient(targets, opts.perfRecord, imageBytes, largest.size, work, skopeoEnv, skopeoArgs, curlArgs, () => {
      client.forgetBlobLocations();
      rmSync(pulled, { recursive: true, force: true });
    });

    // --- report ---------------------------------------------------------------------------------------------
    console.log(
      `\n## The large pull, client by client (${new Date().toISOString().slice(0, 16)}Z, load average during the rounds ${Math.min(...loads).toFixed(1)} to ${Math.max(...loads).toFixed(1)}; ${opts.rounds} interleaved rounds; medians per MB)\n`,
    );
    const cell = (n: number) => (Number.isFinite(n) ? (n >= 100 ? n.toFixed(0) : n.toPrecision(3)) : "");
    const rows: string[][] = [];
    const ratios: string[][] = [];
    const x = (n: number) => `${n.toFixed(2)}×`;
    const spread = (v: number[]) => `${x(Math.min(...v))} / ${x(median(v))} / ${x(Math.max(...v))}`;
    const distribution = targets[targets.length - 1]!;
    for (const c of ["skopeo", "curl"] as const) {
      for (const t of targets) {
        const s = pulls.filter((p) => p.client === c && p.target === t.name);
        const perMb = (f: (p: Pull) => number) => median(s.map((p) => f(p) / (p.bytes / MB)));
        rows.push([
          c,
          t.name,
          cell(median(s.map((p) => p.bytes / MB / p.seconds))),
          `${cell(perMb((p) => (p.clientUser + p.clientSys) * 1000))} (${cell(perMb((p) => p.clientUser * 1000))} + ${cell(perMb((p) => p.clientSys * 1000))})`,
          `${cell(perMb((p) => p.serverCpu * 1000))} (${cell(perMb((p) => p.serverUser * 1000))} + ${cell(perMb((p) => p.serverSys * 1000))})`,
          ...PERF_EVENTS.map((e) => cell(perMb((p) => p.perf[e] ?? NaN))),
        ]);
      }
      for (const t of targets.slice(0, -1)) {
        const pairs = pulls
          .filter((p) => p.client === c && p.target === t.name)
          .map((p) => [p, pulls.find((o) => o.client === c && o.target === distribution.name && o.round === p.round)!] as const);
        const r = (f: (p: Pull) => number) => spread(pairs.map(([a, b]) => f(a) / f(b)));
        ratios.push([
          c,
          t.name,
          r((p) => 1 / p.seconds),
          r((p) => p.perf["task-clock"] ?? NaN),
          r((p) => p.serverCpu),
          r((p) => p.clientUser + p.clientSys),
          r((p) => p.clientUser),
          r((p) => p.clientSys),
          r((p) => p.perf["context-switches"] ?? NaN),
          r((p) => p.perf["raw_syscalls:sys_enter"] ?? NaN),
          r((p) => p.perf["syscalls:sys_enter_read"] ?? NaN),
        ]);
      }
    }
    console.log(textTable(["client", "server", "MB/s", "client CPU ms/MB (user + sys, ticks)", "server CPU ms/MB (schedstat; user + sys, ticks)", ...PERF_EVENTS.map((e) => `${SHORT[e]}/MB`)], rows));
    console.log("\nThis server (and the one before) / Distribution, per round: min / median / max\n");
    console.log(textTable(["client", "server", "MB/s", "client task clock", "server CPU", "client CPU (ticks)", "client user", "client sys", "client ctx sw", "client syscalls", "client reads"], ratios));
  } finally {
    for (const c of cleanups.reverse()) await c();
  }
}

/**
 * skopeo's pulls under `perf record` (cpu-clock, every thread), `rounds` per server interleaved, and the server
 * too (`perf record -p`) while it answers; the samples by function: the kernel's and the shared libraries' by
 * perf's symbols, a Go binary's own (skopeo and docker-registry are stripped, but keep their line tables) by
 * `go tool addr2line` when Go is installed; Node's JIT code stays "[unknown]". Prints milliseconds of CPU per
 * MB (a sample is 1/frequency s): skopeo's by function against each server and the difference, and each
 * server's own largest functions.
 */
async function profileClient(
  targets: readonly Target[],
  rounds: number,
  bytes: number,
  curlBytes: number,
  work: string,
  env: NodeJS.ProcessEnv,
  args: (t: Target) => string[],
  curlArgs: (t: Target) => Promise<string[]>,
  reset: () => void,
): Promise<void> {
  const HZ = 4999;
  const raw: { who: string; target: string; ip: string; sym: string; dso: string }[] = [];
  const read = async (who: string, target: string, data: string) => {
    const { stdout } = await exec("perf", ["script", "-i", data, "-F", "ip,sym,dso"]);
    for (const line of stdout.split("\n")) {
      const m = /^\s*([0-9a-f]+)\s+(.*?)\s+\((.*)\)\s*$/.exec(line);
      if (m) raw.push({ who, target, ip: m[1]!, sym: m[2]!, dso: m[3]! });
    }
    rmSync(data, { force: true });
  };
  for (let round = 1; round <= rounds; round++) {
    for (const t of round % 2 ? targets : [...targets].reverse()) {
      reset();
      const [data, serverData] = [join(work, "perf.data"), join(work, "perf-server.data")];
      for (const [client, cmd] of [["skopeo", [SKOPEO, ...args(t)]], ["curl", ["curl", ...(await curlArgs(t))]]] as const) {
        const server = spawn("perf", ["record", "-q", "-e", "cpu-clock", "-F", String(HZ), "-p", String(t.pid), "-o", serverData], { stdio: "ignore" });
        await new Promise((r) => setTimeout(r, 300)); // perf attached
        await exec("perf", ["record", "-q", "-e", "cpu-clock", "-F", String(HZ), "-o", data, "--", ...cmd], env);
        const exited = new Promise((r) => server.once("exit", r));
        server.kill("SIGINT");
        await exited;
        await read(client, t.name, data);
        await read(`server (${client})`, t.name, serverData);
      }
    }
  }
  reset();
  // A Go binary's addresses to its functions.
  const goName = new Map<string, string>();
  for (const binary of [SKOPEO, "/usr/bin/docker-registry"]) {
    const list = [...new Set(raw.filter((r) => r.dso === binary).map((r) => r.ip))];
    if (!list.length) continue;
    try {
      const out = await new Promise<string>((resolve, reject) => {
        const child = execFile("go", ["tool", "addr2line", binary], { maxBuffer: 256 << 20 }, (err, stdout) => (err ? reject(err) : resolve(String(stdout))));
        child.stdin!.end(list.map((a) => `0x${a}`).join("\n") + "\n");
      });
      const lines = out.split("\n");
      list.forEach((a, i) => goName.set(`${binary} ${a}`, lines[i * 2] ?? "?"));
    } catch {
      // no Go: the binary's samples stay by address
    }
  }
  const counts = new Map<string, Map<string, number>>(); // who + target -> key -> samples
  for (const r of raw) {
    const go = goName.get(`${r.dso} ${r.ip}`);
    const where = r.dso.includes("kernel") ? "kernel" : go ? "own" : r.dso.endsWith("/node") ? "node" : "lib";
    const fn = go ?? (r.sym === "[unknown]" ? `? ${r.dso}` : r.sym);
    const m = counts.get(`${r.who} ${r.target}`) ?? new Map<string, number>();
    counts.set(`${r.who} ${r.target}`, m);
    // V8's garbage collection, on the main thread and its helpers.
    const gc = where === "node" && /v8::internal::(Mark|ConcurrentMark|Sweep|Scaveng|MinorMark|Heap|MemoryAllocator|.*Evacuat|.*Remembered|.*Collector)/.test(fn);
    for (const key of [`${where}: ${fn}`, `(all ${where})`, "(all)", ...(gc ? ["(V8 garbage collection)"] : [])]) m.set(key, (m.get(key) ?? 0) + 1);
  }
  const perMb = (n: number) => ((n / HZ) * 1000) / ((bytes / MB) * rounds);
  const [a, b] = [targets[0]!, targets[targets.length - 1]!];
  const ca = counts.get(`skopeo ${a.name}`) ?? new Map<string, number>();
  const cb = counts.get(`skopeo ${b.name}`) ?? new Map<string, number>();
  const all = [...new Set([...ca.keys(), ...cb.keys()])].map((k) => {
    const [x, y] = [perMb(ca.get(k) ?? 0), perMb(cb.get(k) ?? 0)];
    return { k, x, y, d: x - y };
  });
  const totals = all.filter((r) => r.k.startsWith("("));
  const fns = all.filter((r) => !r.k.startsWith("("));
  const show = (rows: typeof all) => textTable(["function", a.name, b.name, "difference"], rows.map((r) => [r.k, r.x.toFixed(3), r.y.toFixed(3), (r.d >= 0 ? "+" : "") + r.d.toFixed(3)]));
  console.log(`\nskopeo under perf record (cpu-clock at ${HZ} Hz, ${rounds} pulls per server, interleaved): ms of CPU per MB, ${a.name} / ${b.name}\n`);
  console.log(show(totals.sort((p, q) => q.x - p.x)));
  console.log("\nThe largest functions:\n");
  console.log(show([...fns].sort((p, q) => q.x + q.y - p.x - p.y).slice(0, 25)));
  console.log("\nThe largest differences:\n");
  console.log(show([...fns].sort((p, q) => Math.abs(q.d) - Math.abs(p.d)).slice(0, 25)));
  for (const client of ["skopeo", "curl"]) {
    const per = (n: number) => ((n / HZ) * 1000) / (((client === "curl" ? curlBytes : bytes) / MB) * rounds);
    for (const t of targets) {
      const c = counts.get(`server (${client}) ${t.name}`);
      if (!c) continue;
      const rows = [...c].sort((p, q) => q[1] - p[1]).slice(0, client === "curl" ? 12 : 20);
      console.log(`\n${t.name} under perf record -p while it answered ${client === "curl" ? "curl's GETs of the largest layer" : "skopeo's pulls"}: ms of CPU per MB\n`);
      console.log(textTable(["ms/MB", "function"], rows.map(([k, n]) => [per(n).toFixed(3), k.slice(0, 100)])));
    }
  }
  const c = counts.get(`curl ${a.name}`);
  const d = counts.get(`curl ${b.name}`);
  if (c && d) console.log(`\ncurl under perf record: ${per1(c.get("(all)") ?? 0, curlBytes, rounds, HZ).toFixed(3)} ms/MB against ${a.name}, ${per1(d.get("(all)") ?? 0, curlBytes, rounds, HZ).toFixed(3)} against ${b.name}`);
}

/** strace -y output of read/write: per kind (socket read, file write), calls, bytes, and the sizes most seen. */
function summarizeIo(text: string): string {
  const kinds = new Map<string, { calls: number; bytes: number; sizes: Map<number, number>; unaligned: number }>();
  for (const line of text.split("\n")) {
    const m = /(read|write|pwrite64)\(\d+<([^>]*)>.*\)\s+=\s+(\d+)/.exec(line);
    if (!m) continue;
    const [, call, path, ret] = m as unknown as [string, string, string, string];
    const what = path.startsWith("TCP") ? "socket" : path.startsWith("/") ? (path.startsWith("/dev") || path.startsWith("/proc") || path.startsWith("/sys") ? "" : "file") : "";
    if (!what) continue;
    const key = `${call} ${what}`;
    const k = kinds.get(key) ?? { calls: 0, bytes: 0, sizes: new Map<number, number>(), unaligned: 0 };
    kinds.set(key, k);
    const n = Number(ret);
    k.calls++;
    k.bytes += n;
    k.sizes.set(n, (k.sizes.get(n) ?? 0) + 1);
    if (n % 4096) k.unaligned++;
  }
  return [...kinds]
    .map(([key, k]) => {
      const top = [...k.sizes].sort((a, b) => b[1] - a[1]).slice(0, 6).map(([size, n]) => `${size} B ×${n}`).join(", ");
      return `  ${key}: ${k.calls} calls, ${(k.bytes / MB).toFixed(1)} MB, ${k.unaligned} not a multiple of 4 KiB; most seen: ${top}`;
    })
    .join("\n");
}

/** strace -tt -yy output of reads: per connection, when its first and last bytes were read and how many. */
function socketTimeline(text: string): string {
  const socks = new Map<string, { first: number; last: number; bytes: number }>();
  const at = (hms: string) => {
    const [h, m, sec] = hms.split(":").map(Number) as [number, number, number];
    return (h * 60 + m) * 60 + sec;
  };
  for (const line of text.split("\n")) {
    const m = /^(\d\d:\d\d:\d\d\.\d+) read\(\d+<TCP:\[([^\]]*)\]>.*\)\s+=\s+(\d+)/.exec(line);
    if (!m) continue;
    const t = at(m[1]!);
    const s = socks.get(m[2]!) ?? { first: t, last: t, bytes: 0 };
    socks.set(m[2]!, s);
    s.first = Math.min(s.first, t);
    s.last = Math.max(s.last, t);
    s.bytes += Number(m[3]);
  }
  const t0 = Math.min(...[...socks.values()].map((s) => s.first));
  return [...socks.values()]
    .sort((a, b) => a.first - b.first)
    .map((s) => `  connection: ${(s.bytes / MB).toFixed(1)} MB read from ${((s.first - t0) * 1000).toFixed(0)} to ${((s.last - t0) * 1000).toFixed(0)} ms`)
    .join("\n");
}

const per1 = (samples: number, bytes: number, rounds: number, hz: number) => ((samples / hz) * 1000) / ((bytes / MB) * rounds);

/**
 * perf script of sys_enter_read / sys_exit_read: per file descriptor that read 1 MB or more in reads of 16 KiB or
 * more (a blob's), its first and last such read and their bytes, from the process's first read (its loader's).
 */
function readTimeline(text: string): string {
  const pending = new Map<string, number>(); // tid -> fd
  const fds = new Map<number, { first: number; last: number; bytes: number }>();
  let t0 = Infinity;
  let exit = NaN;
  for (const line of text.split("\n")) {
    const e = /^\s*\d+\s+([\d.]+):\s+syscalls:sys_enter_exit_group/.exec(line);
    if (e) exit = Number(e[1]);
    const m = /^\s*(\d+)\s+([\d.]+):\s+syscalls:sys_(enter|exit)_read:\s+(?:fd: 0x([0-9a-f]+)|0x([0-9a-f]+))/.exec(line);
    if (!m) continue;
    const [tid, time] = [m[1]!, Number(m[2])];
    t0 = Math.min(t0, time);
    if (m[3] === "enter") pending.set(tid, parseInt(m[4]!, 16));
    else {
      const fd = pending.get(tid);
      pending.delete(tid);
      const ret = parseInt(m[5]!, 16);
      if (fd === undefined || ret > 1 << 30) continue; // an error (negative)
      // A blob's reads are the large ones (a descriptor is reused: the loader's files, then the small answers).
      if (ret < 16 << 10) continue;
      const f = fds.get(fd) ?? { first: time, last: time, bytes: 0 };
      fds.set(fd, f);
      f.last = time;
      f.bytes += ret;
    }
  }
  const big = [...fds.values()].filter((f) => f.bytes >= MB).sort((a, b) => a.first - b.first);
  const ms = (t: number) => ((t - t0) * 1000).toFixed(0);
  const [first, last] = [Math.min(...big.map((f) => f.first)), Math.max(...big.map((f) => f.last))];
  return [
    `  from its first read (the loader's) to: the first blob byte ${ms(first)} ms, the last ${ms(last)} ms, exit_group ${ms(exit)} ms`,
    ...big.map((f) => `  ${(f.bytes / MB).toFixed(1)} MB from ${ms(f.first)} to ${ms(f.last)} ms`),
  ].join("\n");
}
