// Benchmarks (not tests): each prints its figures beside a baseline measured in the same run.
//   npm run bench -- ping [--seconds 10] [--concurrency 16]
//   npm run bench -- registry [--seconds 3] [--concurrency 16] [--tags 1000000] [--keep-indexes] [--rounds 3]
//     (needs PostgreSQL: DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres)
//   npm run bench -- iam [--seconds 3] [--concurrency 16] [--bindings 2000] [--rounds 3]   (PostgreSQL too; against the peers)
//   npm run bench -- authz [--seconds 2] [--concurrency 8] [--rounds 3]   (PostgreSQL too; callers bound in 1 / 100 /
//     10,000 groups, and nesting depth 1 / 5 / 20; BENCH_BEFORE_ROOT=<checkout> measures that code too)
//   npm run bench -- events [--events 100000] [--profile] [--sink-concurrency 32]   (PostgreSQL too)
//   [BENCH_BEFORE_ROOT=<checkout>] npm run bench -- fan-out [--seconds 3] [--concurrency 4] [--rounds 3]   (PostgreSQL too;
//     UpdateRepo's latency with 0 / 1 / 100 / 1,000 subscriptions on its group, and delivery at 1,000)
//   npm run bench -- advisories [--seconds 2] [--files 1600] [--list-advisories 300000] [--only TEXT,TEXT]   (PostgreSQL too)
//   [BENCH_BEFORE_ROOT=<checkout>] npm run bench -- advisory-documents [--seconds 3] [--concurrency 16] [--rounds 1]   (PostgreSQL too)
//   npm run bench -- pooler [--seconds 3] [--concurrency 16] [--rounds 3]   (PostgreSQL and PgBouncer)
//   npm run bench -- cold-start [--runs 7]   (PostgreSQL too; builds the server into a scratch directory)
//   npm run bench -- profile [--tags 100000] [--seconds 10] [--concurrency 16] [--built] [--top N]   (PostgreSQL too; the server under
//     --cpu-prof for Ping, ListTags, GetRepo and a ListAdvisories lookup, its profile summarised by package and
//     function; --only TEXT: the targets whose name contains TEXT)
//   BENCH_BEFORE_ROOT=<checkout> npm run bench -- ab [--pairs 15] [--seconds 1] [--tags 100000] [--only TEXT]
//     (PostgreSQL too; the code before a change against this one, in alternating pairs: the median ratio of
//     server CPU per request)
//   npm run bench -- perf [--tags 100000] [--seconds 5] [--concurrency 16] [--only TEXT] [--top N]   (PostgreSQL too, and
//     Linux perf: the server and its peers each sampled whole, their CPU per request by what ran)
//   npm run bench -- growth [--only tags|advisories] [--sizes N,N,N] [--seconds 3] [--concurrency 8] [--rounds 3]
//     (PostgreSQL too; the cost of ListTags and ListAdvisories as the data grows, each plan choice)
//   npm run bench -- replicas [--seconds 3] [--concurrency 16] [--rounds 3]   (the machine's PostgreSQL binaries: a
//     primary and a streaming replica of its own; server CPU per read with and without, the replica's share)
//   npm run bench -- oci [--rounds 9] [--small-rounds 3] [--mb 100] [--images 200] [--memory-mb N,N,N] [--profile] [--top N]
//     (PostgreSQL too, and Debian's skopeo and docker-registry: push and pull against the Distribution registry;
//     --rounds: of the multi-layer image, --small-rounds: of the small images; --memory-mb:
//     the single layers of the memory curve, default mb/10, mb, 5 mb; --profile: the server under --cpu-prof,
//     its main thread per operation)
//   npm run bench -- oci-pull [--rounds 9] [--mb 100] [--strace] [--perf-record N]   (PostgreSQL too, skopeo, docker-registry, curl,
//     perf: the multi-layer image pulled by skopeo and its largest layer by curl from each server, interleaved;
//     the client's CPU, context switches and system calls per MB; --strace: strace -f -c of one pull per server; --perf-record N: N skopeo
//     pulls per server under perf record, its CPU per MB by function)
//   npm run bench:soak -- [--minutes 10] [--concurrency 10] [--interval 30] [--warmup 60]   (PostgreSQL too;
//     the same as `npm run bench -- soak`, which only runs when named)
import { parseArgs } from "node:util";
import { benchAb } from "./ab.js";
import { benchAdvisoryDocuments } from "./advisory-documents.js";
import { benchAdvisories } from "./advisories.js";
import { benchAuthz } from "./authz.js";
import { benchColdStart } from "./cold-start.js";
import { benchEvents } from "./events.js";
import { benchGrowth } from "./growth.js";
import { benchFanOut } from "./fan-out.js";
import { benchPooler } from "./pooler.js";
import { benchIam } from "./iam.js";
import { benchOci } from "./oci.js";
import { benchOciPull } from "./oci-pull.js";
import { benchPerf } from "./perf.js";
import { benchPing } from "./ping.js";
import { benchProfile } from "./profile.js";
import { benchRegistry } from "./registry.js";
import { benchReplicas } from "./replicas.js";
import { benchSoak } from "./soak.js";

const usage =
  "usage: npm run bench -- [ping] [registry] [iam] [authz] [events] [fan-out] [growth] [advisories] [advisory-documents] [pooler] [cold-start] [profile] [ab] [soak] [perf] [oci] [oci-pull] [replicas] [--seconds N] [--concurrency N] [--tags N] [--keep-indexes] [--bindings N] [--events N] [--profile] [--sink-concurrency N] [--minutes N] [--interval N] [--warmup N] [--files N] [--list-advisories N] [--runs N] [--only TEXT] [--rounds N] [--sizes N,N,N] [--built] [--top N] [--pairs N] [--mb N] [--images N] [--small-rounds N] [--memory-mb N,N,N] [--strace] [--perf-record N]";
let parsed;
try {
  parsed = parseArgs({
    allowPositionals: true,
    options: {
      seconds: { type: "string" },
      concurrency: { type: "string" },
      tags: { type: "string", default: "1000000" },
      bindings: { type: "string", default: "2000" },
      "keep-indexes": { type: "boolean", default: false },
      events: { type: "string", default: "100000" },
      profile: { type: "boolean", default: false },
      strace: { type: "boolean", default: false },
      "perf-record": { type: "string" },
      "sink-concurrency": { type: "string" },
      minutes: { type: "string", default: "10" },
      interval: { type: "string", default: "30" },
      warmup: { type: "string", default: "60" },
      files: { type: "string", default: "1600" },
      "list-advisories": { type: "string", default: "300000" },
      runs: { type: "string", default: "7" },
      only: { type: "string" },
      rounds: { type: "string" },
      sizes: { type: "string" },
      "memory-mb": { type: "string" },
      built: { type: "boolean", default: false },
      top: { type: "string" },
      pairs: { type: "string", default: "15" },
      mb: { type: "string", default: "100" },
      images: { type: "string", default: "200" },
      "small-rounds": { type: "string", default: "3" },
    },
  });
} catch (err) {
  console.error(`${(err as Error).message}\n${usage}`);
  process.exit(2);
}
const { values, positionals } = parsed;
// Each benchmark has its own default duration per measurement: the registry one takes many measurements.
const seconds = (fallback: number) => (values.seconds === undefined ? fallback : Number(values.seconds));
// The soak spreads its clients over the five protocols: 10 by default; the others measure with 16.
const concurrency = (fallback: number) => (values.concurrency === undefined ? fallback : Number(values.concurrency));
const tags = Number(values.tags);
const bindings = Number(values.bindings);
const events = Number(values.events);
const sinkConcurrency = values["sink-concurrency"] === undefined ? undefined : Number(values["sink-concurrency"]);
const minutes = Number(values.minutes);
const interval = Number(values.interval);
const warmup = Number(values.warmup);
const files = Number(values.files);
const listAdvisories = Number(values["list-advisories"]);
const runs = Number(values.runs);
const top = values.top === undefined ? undefined : Number(values.top);
const pairs = Number(values.pairs);
const sizes = values.sizes?.split(",").map(Number);
const memoryMb = values["memory-mb"]?.split(",").map(Number);
const mb = Number(values.mb);
const images = Number(values.images);
if (
  !(mb >= 1) ||
  !Number.isInteger(images) ||
  images < 1 ||
  !Number.isInteger(Number(values["small-rounds"])) ||
  Number(values["small-rounds"]) < 0 ||
  !Number.isInteger(pairs) ||
  pairs < 1 ||
  (top !== undefined && (!Number.isInteger(top) || top < 1)) ||
  !Number.isInteger(files) ||
  files < 1 ||
  !Number.isInteger(listAdvisories) ||
  listAdvisories < 1000 ||
  !(seconds(1) > 0) ||
  !Number.isInteger(concurrency(16)) ||
  concurrency(16) < 1 ||
  !Number.isInteger(tags) ||
  tags < 1000 ||
  !Number.isInteger(bindings) ||
  bindings < 1 ||
  !Number.isInteger(events) ||
  events < 100 ||
  (sinkConcurrency !== undefined && (!Number.isInteger(sinkConcurrency) || sinkConcurrency < 1)) ||
  !(minutes > 0) ||
  !(interval > 0) ||
  !(warmup >= 0) ||
  (sizes !== undefined && !sizes.every((n) => Number.isInteger(n) && n >= 1000)) ||
  (memoryMb !== undefined && !memoryMb.every((n) => n > 0)) ||
  !Number.isInteger(runs) ||
  runs < 1
) {
  console.error(usage);
  process.exit(2);
}

const benches: Record<string, () => Promise<void>> = {
  ping: () => benchPing({ seconds: seconds(10), concurrency: concurrency(16) }),
  registry: () =>
    benchRegistry({ seconds: seconds(3), concurrency: concurrency(16), tags, keepIndexes: values["keep-indexes"], rounds: values.rounds === undefined ? undefined : Number(values.rounds) }),
  iam: () => benchIam({ seconds: seconds(3), concurrency: concurrency(16), bindings, rounds: values.rounds === undefined ? undefined : Number(values.rounds) }),
  authz: () => benchAuthz({ seconds: seconds(2), concurrency: concurrency(8), rounds: values.rounds === undefined ? 3 : Number(values.rounds) }),
  events: () => benchEvents({ events, profile: values.profile, sinkConcurrency }),
  "fan-out": () => benchFanOut({ seconds: seconds(3), concurrency: concurrency(4), rounds: values.rounds === undefined ? 3 : Number(values.rounds) }),
  "advisory-documents": () => benchAdvisoryDocuments({ seconds: seconds(3), concurrency: concurrency(16), rounds: values.rounds === undefined ? 1 : Number(values.rounds) }),
  pooler: () => benchPooler({ seconds: seconds(3), concurrency: concurrency(16), rounds: values.rounds === undefined ? 3 : Number(values.rounds) }),
  advisories: () => benchAdvisories({ seconds: seconds(2), files, listAdvisories, only: values.only }),
  "cold-start": () => benchColdStart({ runs }),
  profile: () => benchProfile({ tags: values.tags === "1000000" ? 100_000 : tags, seconds: seconds(10), concurrency: concurrency(16), only: values.only, built: values.built, top }),
  perf: () => benchPerf({ tags: values.tags === "1000000" ? 100_000 : tags, seconds: seconds(5), concurrency: concurrency(16), only: values.only, top }),
  ab: () => benchAb({ pairs, seconds: seconds(1), concurrency: concurrency(16), tags: values.tags === "1000000" ? 100_000 : tags, only: values.only }),
  growth: () => benchGrowth({ only: values.only, sizes, seconds: seconds(3), concurrency: concurrency(8), rounds: values.rounds === undefined ? 3 : Number(values.rounds) }),
  oci: () => benchOci({ rounds: values.rounds === undefined ? 9 : Number(values.rounds), smallRounds: Number(values["small-rounds"]), mb, images, memoryMb, profile: values.profile, top }),
  "oci-pull": () => benchOciPull({ rounds: values.rounds === undefined ? 9 : Number(values.rounds), mb, strace: values.strace, perfRecord: values["perf-record"] === undefined ? 0 : Number(values["perf-record"]) }),
  replicas: () => benchReplicas({ seconds: seconds(3), concurrency: concurrency(16), rounds: values.rounds === undefined ? 3 : Number(values.rounds) }),
  soak: () => benchSoak({ minutes, concurrency: concurrency(10), intervalSeconds: interval, warmupSeconds: warmup }),
};
// With no name, every benchmark but the soak (it takes ten minutes: name it), the profiles (profile, perf),
// ab (it needs BENCH_BEFORE_ROOT), growth (it seeds 10,000,000 tags: name it) and oci, oci-pull (they need skopeo and docker-registry installed).
const names = positionals.length ? positionals : Object.keys(benches).filter((n) => n !== "soak" && n !== "profile" && n !== "perf" && n !== "ab" && n !== "growth" && n !== "oci" && n !== "oci-pull");
for (const name of names) {
  const bench = benches[name];
  if (!bench) {
    console.error(`unknown benchmark ${name}; known: ${Object.keys(benches).join(", ")}`);
    process.exit(2);
  }
  await bench();
}
