// Benchmarks (not tests): each prints its figures beside a baseline measured in the same run.
//   npm run bench -- ping [--seconds 10] [--concurrency 16]
import { parseArgs } from "node:util";
import { benchPing } from "./ping.js";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { seconds: { type: "string", default: "10" }, concurrency: { type: "string", default: "16" } },
});
const seconds = Number(values.seconds);
const concurrency = Number(values.concurrency);
if (!(seconds > 0) || !Number.isInteger(concurrency) || concurrency < 1) {
  console.error("usage: npm run bench -- [ping] [--seconds N] [--concurrency N]");
  process.exit(2);
}

const benches: Record<string, () => Promise<void>> = {
  ping: () => benchPing({ seconds, concurrency }),
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
