// A small closed-loop load generator: `concurrency` workers each send one request at a time for a fixed
// duration; latencies are recorded per request. The same client code drives every target, so differences
// come from the servers.
import http from "node:http";
import http2 from "node:http2";
import { create, toBinary, type DescMessage, type MessageInitShape } from "@bufbuild/protobuf";
import { metered, type CpuMeter } from "./cpu.js";

/** A progress line on stderr (the figures go to stdout). */
export const say = (line: string): void => void process.stderr.write(line + "\n");

export interface Result {
  name: string;
  requests: number;
  errors: number;
  seconds: number;
  rps: number;
  p50: number;
  p99: number;
  /** CPU time per request in ms, by meter label (the server, PostgreSQL's backends, ...), over the measured window. */
  cpu: Record<string, number>;
}

export type Send = () => Promise<boolean>;

/** `concurrency` workers, each running `step(worker)` one at a time until `seconds` have passed; resolves with the seconds elapsed. */
export async function closedLoop(concurrency: number, seconds: number, step: (worker: number) => Promise<void>): Promise<number> {
  const started = performance.now();
  const end = started + seconds * 1000;
  const worker = async (w: number) => {
    while (performance.now() < end) await step(w);
  };
  await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
  return (performance.now() - started) / 1000;
}

/** The p-th percentile of latencies sorted in ascending order (NaN when there are none). */
export function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

/** The median of some numbers (the mean of the middle two for an even count). */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

export interface MeasureOptions {
  concurrency: number;
  seconds: number;
  warmupSeconds: number;
  /** Whose CPU to read over the measured window (not the warm-up); each gives Result.cpu its label. */
  cpu?: readonly CpuMeter[];
}

export async function measure(name: string, makeSend: () => Send, opts: MeasureOptions): Promise<Result> {
  const send = makeSend();
  const run = async (seconds: number, record: boolean) => {
    const latencies: number[] = [];
    let errors = 0;
    const elapsed = await closedLoop(opts.concurrency, seconds, async () => {
      const t0 = performance.now();
      const ok = await send().catch(() => false);
      if (!ok) errors++;
      if (record) latencies.push(performance.now() - t0);
    });
    return { latencies, errors, elapsed };
  };
  await run(opts.warmupSeconds, false);
  const { value, cpu } = await metered(opts.cpu ?? [], () => run(opts.seconds, true));
  const { latencies, errors, elapsed } = value;
  latencies.sort((a, b) => a - b);
  const n = Math.max(1, latencies.length);
  const perRequest = Object.fromEntries(Object.entries(cpu).map(([label, s]) => [label, (s * 1000) / n]));
  return {
    name,
    requests: latencies.length,
    errors,
    seconds: elapsed,
    rps: latencies.length / elapsed,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    cpu: perRequest,
  };
}

/** HTTP/1.1 keep-alive requests (REST, Connect JSON, the bare server). */
export function http1Sender(port: number, method: string, path: string, body?: string, headers: Record<string, string> = {}): () => Send {
  return () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
    return () =>
      new Promise<boolean>((resolve) => {
        const req = http.request(
          { host: "127.0.0.1", port, method, path, agent, headers: { ...headers, ...(body ? { "content-type": "application/json" } : {}) } },
          (res) => {
            res.resume();
            res.on("end", () => resolve(res.statusCode === 200));
          },
        );
        req.on("error", () => resolve(false));
        req.end(body);
      });
  };
}

/** gRPC unary calls over one HTTP/2 connection (cleartext), with optional request headers (a bearer token). */
export function grpcSender(port: number, path: string, requestBytes: Uint8Array | readonly Uint8Array[] = new Uint8Array(), headers: Record<string, string> = {}): () => Send {
  // Several requests: each call sends the next, in turn, over the same connection.
  const frames = (requestBytes instanceof Uint8Array ? [requestBytes] : requestBytes).map((bytes) => {
    const prefix = Buffer.alloc(5);
    prefix.writeUInt32BE(bytes.length, 1);
    return Buffer.concat([prefix, Buffer.from(bytes)]);
  });
  return () => {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on("error", () => {});
    let next = 0;
    return () =>
      new Promise<boolean>((resolve) => {
        const frame = frames[next++ % frames.length]!;
        const stream = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc+proto", te: "trailers", ...headers });
        let status: string | undefined;
        stream.on("trailers", (t) => (status = String(t["grpc-status"])));
        stream.on("response", (h) => {
          if (h["grpc-status"] !== undefined) status = String(h["grpc-status"]);
        });
        stream.resume();
        stream.on("end", () => resolve(status === "0"));
        stream.on("error", () => resolve(false));
        stream.end(frame);
      });
  };
}

/** gRPC unary calls of a request message, or of several in turn (see grpcSender). */
export function grpcMessageSender<I extends DescMessage>(
  port: number,
  path: string,
  schema: I,
  request: MessageInitShape<I> | readonly MessageInitShape<I>[],
  headers: Record<string, string> = {},
): () => Send {
  const encode = (r: MessageInitShape<I>) => toBinary(schema, create(schema, r));
  return grpcSender(port, path, Array.isArray(request) ? request.map(encode) : encode(request as MessageInitShape<I>), headers);
}

/** A raw query run by the load generator itself (e.g. postgres.js prepared statements); ok when it returns `expectRows` rows. */
export function sqlSender(run: () => PromiseLike<readonly unknown[]>, expectRows: number): () => Send {
  return () => async () => (await run()).length === expectRows;
}

/** The CPU labels measured in any of the results, in the order first met. */
export function cpuLabels(results: readonly Result[]): string[] {
  return [...new Set(results.flatMap((r) => Object.keys(r.cpu)))];
}

/** CPU ms per request, "" when the label was not measured for this row. */
export function cpuCell(r: Result, label: string): string {
  const v = r.cpu[label];
  return v === undefined ? "" : v.toFixed(3);
}

export function table(results: Result[], baseline: Result): string {
  const labels = cpuLabels(results);
  const rows = results.map((r) => [
    r.name,
    r.rps.toFixed(0),
    r.p50.toFixed(2),
    r.p99.toFixed(2),
    ...labels.map((l) => cpuCell(r, l)),
    (r.rps / baseline.rps).toFixed(2),
    String(r.errors),
  ]);
  const head = ["target", "req/s", "p50 ms", "p99 ms", ...labels.map((l) => `${l} CPU ms/req`), `x ${baseline.name}`, "errors"];
  return textTable(head, rows);
}

/** A plain-text table: the first column left-aligned, the others right-aligned, a rule under the head. */
export function textTable(head: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: readonly string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  return [line(head), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n");
}
