// The events benchmark's baseline: a bare node:http keep-alive client POSTing, to the same sink, requests of
// the size of a delivery (the same CloudEvent headers, bearer token and body, captured from a real delivery
// request), each with a new ce-id. Prints "ready", then for each line `run <requests> <concurrency>` on stdin
// sends that many with that many in flight and prints {"seconds": s, "errors": n}.
//   tsx bench/post-client.ts '{"port": N, "path": "/events", "headers": {...}, "body": "<base64>"}'
import { randomUUID } from "node:crypto";
import http from "node:http";
import { createInterface } from "node:readline";

const { port, path, headers, body: bodyBase64 } = JSON.parse(process.argv[2]!) as { port: number; path: string; headers: Record<string, string>; body: string };
const body = Buffer.from(bodyBase64, "base64");

function post(agent: http.Agent): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.request({ host: "127.0.0.1", port, path, method: "POST", agent, headers: { ...headers, "ce-id": randomUUID() } }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode !== undefined && res.statusCode >= 200 && res.statusCode < 300));
      res.on("error", () => resolve(false));
    });
    req.on("error", () => resolve(false));
    req.end(body);
  });
}

async function run(requests: number, concurrency: number): Promise<{ seconds: number; errors: number }> {
  // A new agent per run: its connections open during the run, as the server's do.
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency, maxFreeSockets: concurrency, scheduling: "lifo" });
  let sent = 0;
  let errors = 0;
  const t0 = performance.now();
  const worker = async () => {
    while (sent < requests) {
      sent++;
      if (!(await post(agent))) errors++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const seconds = (performance.now() - t0) / 1000;
  agent.destroy();
  return { seconds, errors };
}

process.stdout.write("ready\n");
for await (const line of createInterface({ input: process.stdin })) {
  const [command, requests, concurrency] = line.split(" ");
  if (command !== "run") continue;
  process.stdout.write(JSON.stringify(await run(Number(requests), Number(concurrency))) + "\n");
}
