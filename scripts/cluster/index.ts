// npm run cluster -- up|down|status|test [--dir <dir>] [--seconds <n>]: the topology of docs/deployment.md on
// this machine (topology.ts), and its test under load with disruptions (load-test.ts).
import { parseArgs } from "node:util";
import { DEFAULT_DIR, down, readState, status, up } from "./topology.js";

const USAGE = [
  "usage: npm run cluster -- up|down|status|test [--dir <dir>] [--seconds <n>] [--keep]",
  "  up       start the topology under --dir (default /tmp/apiserver-cluster) on the ports of docs/deployment.md",
  "  down     stop everything it started and remove --dir",
  "  status   what runs (exit 1 when something is down)",
  "  test     the load test with disruptions for --seconds (default 60; on a running cluster, or one brought",
  "           up for it and taken down after unless --keep); exit 1 when a check fails",
].join("\n");

async function main(): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      allowPositionals: true,
      options: { dir: { type: "string", default: DEFAULT_DIR }, seconds: { type: "string", default: "60" }, keep: { type: "boolean", default: false }, help: { type: "boolean", short: "h" } },
    });
  } catch (err) {
    process.stderr.write(`cluster: ${(err as Error).message}\n${USAGE}\n`);
    return 2;
  }
  const { positionals, values } = parsed;
  const command = positionals[0];
  if (values.help || !command) {
    process.stdout.write(USAGE + "\n");
    return values.help ? 0 : 2;
  }
  const dir = values.dir;
  switch (command) {
    case "up": {
      const state = await up({ dir });
      for (const line of (await status(state.dir)).lines) process.stdout.write(line + "\n");
      process.stdout.write(`\nThe frontend: ${`http://127.0.0.1:${state.ports.haproxy}`} (HTTP/1.1 and h2c). Stop it all: npm run cluster -- down\n`);
      return 0;
    }
    case "down":
      await down(dir);
      return 0;
    case "status": {
      const s = await status(dir);
      for (const line of s.lines) process.stdout.write(line + "\n");
      return s.running ? 0 : 1;
    }
    case "test": {
      const seconds = Number(values.seconds);
      if (!Number.isInteger(seconds) || seconds < 10) {
        process.stderr.write(`cluster: --seconds must be a whole number of at least 10\n${USAGE}\n`);
        return 2;
      }
      const { runClusterTest, printReport } = await import("./load-test.js");
      // A running cluster is used as it is; otherwise one is brought up, and down again at the end.
      const running = readState(dir) !== undefined && (await status(dir)).running;
      const state = running ? readState(dir)! : await up({ dir });
      try {
        const report = await runClusterTest(state, { seconds, say: (l) => process.stdout.write(l + "\n") });
        printReport(report, (l) => process.stdout.write(l + "\n"));
        return report.failed.length === 0 ? 0 : 1;
      } finally {
        if (!running && !values.keep) await down(dir);
      }
    }
    default:
      process.stderr.write(USAGE + "\n");
      return 2;
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`cluster: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
