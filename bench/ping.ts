// Ping over REST, Connect and gRPC against a bare node:http (and node:http2) server answering the same
// response, measured in one run. Usage: npm run bench -- ping [--seconds N] [--concurrency N]
import { processCpu, type CpuMeter } from "./cpu.js";
import { grpcSender, http1Sender, measure, table, type Result } from "./load.js";
import { startApiServer, startBareServer } from "./processes.js";

const PING = "/chainguard.platform.ping.v2.PingService/Ping";

export async function benchPing(opts: { seconds: number; concurrency: number }): Promise<void> {
  const api = await startApiServer();
  const bare = await startBareServer();
  // BENCH_BEFORE_ROOT names another checkout (the code before a change): its server is measured too.
  const beforeRoot = process.env.BENCH_BEFORE_ROOT;
  const before = beforeRoot ? await startApiServer({}, { root: beforeRoot }) : undefined;
  const load = { ...opts, warmupSeconds: Math.max(1, opts.seconds / 5) };
  try {
    const results: Result[] = [];
    // CPU per request of the process answering: the baselines' process, or the API server.
    const bareCpu = [processCpu("server", bare.pid)];
    const apiCpu = [processCpu("server", api.serverPid)];
    const run = async (name: string, send: Parameters<typeof measure>[1], cpu: CpuMeter[]) => {
      const r = await measure(name, send, { ...load, cpu });
      results.push(r);
      console.error(`  measured ${name}: ${r.rps.toFixed(0)} req/s, ${r.cpu.server?.toFixed(3)} ms CPU/req`);
    };
    await run("bare node:http", http1Sender(bare.http1, "GET", "/ping/v2/ping"), bareCpu);
    await run("bare node:http2 (gRPC frame)", grpcSender(bare.http2, PING), bareCpu);
    await run("plain connect-node, Connect JSON", http1Sender(bare.connectHttp1, "POST", PING, "{}"), bareCpu);
    await run("plain connect-node, gRPC", grpcSender(bare.connectHttp2, PING), bareCpu);
    await run("REST GET /ping/v2/ping", http1Sender(api.port, "GET", "/ping/v2/ping"), apiCpu);
    await run("Connect JSON (HTTP/1.1)", http1Sender(api.port, "POST", PING, "{}"), apiCpu);
    await run("gRPC (h2c)", grpcSender(api.port, PING), apiCpu);
    if (before) {
      const beforeCpu = [processCpu("server", before.serverPid)];
      await run("before: REST GET /ping/v2/ping", http1Sender(before.port, "GET", "/ping/v2/ping"), beforeCpu);
      await run("before: Connect JSON (HTTP/1.1)", http1Sender(before.port, "POST", PING, "{}"), beforeCpu);
      await run("before: gRPC (h2c)", grpcSender(before.port, PING), beforeCpu);
    }
    console.log(`\nPing, ${opts.concurrency} concurrent clients, ${opts.seconds}s each, node ${process.version}, ${new Date().toISOString()}\n`);
    console.log(table(results, results[0]!));
  } finally {
    await api.stop();
    await bare.stop();
    await before?.stop();
  }
}
