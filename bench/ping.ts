// Ping over REST, Connect and gRPC against a bare node:http (and node:http2) server answering the same
// response, measured in one run. Usage: npm run bench -- ping [--seconds N] [--concurrency N]
import { grpcSender, http1Sender, measure, table, type Result } from "./load.js";
import { startApiServer, startBareServer } from "./processes.js";

const PING = "/chainguard.platform.ping.v2.PingService/Ping";

export async function benchPing(opts: { seconds: number; concurrency: number }): Promise<void> {
  const api = await startApiServer();
  const bare = await startBareServer();
  const load = { ...opts, warmupSeconds: Math.max(1, opts.seconds / 5) };
  try {
    const results: Result[] = [];
    const run = async (name: string, send: Parameters<typeof measure>[1]) => {
      const r = await measure(name, send, load);
      results.push(r);
      console.error(`  measured ${name}: ${r.rps.toFixed(0)} req/s`);
    };
    await run("bare node:http", http1Sender(bare.http1, "GET", "/ping/v2/ping"));
    await run("bare node:http2 (gRPC frame)", grpcSender(bare.http2, PING));
    await run("plain connect-node, Connect JSON", http1Sender(bare.connectHttp1, "POST", PING, "{}"));
    await run("plain connect-node, gRPC", grpcSender(bare.connectHttp2, PING));
    await run("REST GET /ping/v2/ping", http1Sender(api.port, "GET", "/ping/v2/ping"));
    await run("Connect JSON (HTTP/1.1)", http1Sender(api.port, "POST", PING, "{}"));
    await run("gRPC (h2c)", grpcSender(api.port, PING));
    console.log(`\nPing, ${opts.concurrency} concurrent clients, ${opts.seconds}s each, node ${process.version}, ${new Date().toISOString()}\n`);
    console.log(table(results, results[0]!));
  } finally {
    await api.stop();
    await bare.stop();
  }
}
