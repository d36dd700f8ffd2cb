// Benchmarks (not tests): each prints its figures beside a baseline measured in the same run.
//   npm run bench -- ping [--seconds 10] [--concurrency 16]
//   npm run bench -- registry [--seconds 3] [--concurrency 16] [--tags 1000000] [--keep-indexes]
//     (needs PostgreSQL: DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres)
//   npm run bench -- iam [--seconds 3] [--concurrency 16] [--bindings 2000]   (PostgreSQL too)
import { parseArgs } from "node:util";
import { benchIam } from "./iam.js";
import { benchPing } from "./ping.js";
import { benchRegistry } from "./registry.js";

const usage = "usage: npm run bench -- [ping] [registry] [iam] [--seconds N] [--concurrency N] [--tags N] [--keep-indexes] [--bindings N]";
let parsed;
try {
  parsed = parseArgs({
    allowPositionals: true,
    options: {
      seconds: { type: "string" },
      concurrency: { type: "string", default: "16" },
      tags: { type: "string", default: "1000000" },
      bindings: { type: "string", default: "2000" },
      "keep-indexes": { type: "boolean", default: false },
    },
  });
} catch (err) {
  console.error(`${(err as Error).message}\n${usage}`);
  process.exit(2);
}
const { values, positionals } = parsed;
// Each benchmark has its own default duration per measurement: the registry one takes many measurements.
const seconds = (fallback: number) => (values.seconds === undefined ? fallback : Number(values.seconds));
const concurrency = Number(values.concurrency);
const tags = Number(values.tags);
const bindings = Number(values.bindings);
if (!(seconds(1) > 0) || !Number.isInteger(concurrency) || concurrency < 1 || !Number.isInteger(tags) || tags < 1000 || !Number.isInteger(bindings) || bindings < 1) {
  console.error(usage);
  process.exit(2);
}

const benches: Record<string, () => Promise<void>> = {
  ping: () => benchPing({ seconds: seconds(10), concurrency }),
  registry: () => benchRegistry({ seconds: seconds(3), concurrency, tags, keepIndexes: values["keep-indexes"] }),
  iam: () => benchIam({ seconds: seconds(3), concurrency, bindings }),
};
const names = positionals.length ? positionals : Object.keys(benches);
for (const name of names) {
  const bench = benches[name];
  if (!bench) {
    console.error(`unknown benchmark ${name}; known: ${Object.keys(benches).join(", ")}`);
    process.exit(2);
  }
  await bench();
}
