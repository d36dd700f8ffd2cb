// A webhook receiver on 127.0.0.1 for event delivery tests: it records every request it gets and answers as
// the test says (200 by default; a status, or a hang that never answers).
import http from "node:http";
import type { AddressInfo } from "node:net";

export interface Received {
  /** The request's path (and query). */
  path: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  at: number;
}

/** What the sink does with a request: answer a status, answer it after a delay, or never answer ("hang"). */
export type SinkAnswer = number | "hang" | { status: number; afterMs: number };

export interface TestSink {
  url: string;
  received: Received[];
  /** Decides each answer (default: 200). */
  answer: (req: Received, index: number) => SinkAnswer;
  /** Waits until at least n requests have arrived (fails after ms). */
  waitFor(n: number, ms?: number): Promise<Received[]>;
  /** Waits until a request matching `test` has arrived, and returns the first (fails after ms). */
  waitForMatch(test: (r: Received) => boolean, what: string, ms?: number): Promise<Received>;
  /** The CloudEvent ids received, with how many times each came. */
  idCounts(): Map<string, number>;
  close(): Promise<void>;
}

export async function startSink(path = "/hook"): Promise<TestSink> {
  const received: Received[] = [];
  const waiters = new Set<() => void>();
  const hung = new Set<http.ServerResponse>();
  const arrival = () =>
    new Promise<void>((r) => {
      const t = setTimeout(r, 50);
      waiters.add(() => (clearTimeout(t), r()));
    });
  const sink: Omit<TestSink, "url"> = {
    received,
    answer: () => 200,
    async waitFor(n, ms = 30_000) {
      const end = Date.now() + ms;
      while (received.length < n) {
        if (Date.now() > end) throw new Error(`sink: ${received.length} of ${n} requests after ${ms} ms`);
        await arrival();
      }
      return received.slice();
    },
    async waitForMatch(test, what, ms = 30_000) {
      const end = Date.now() + ms;
      for (;;) {
        const found = received.find(test);
        if (found) return found;
        if (Date.now() > end) throw new Error(`sink: no ${what} among ${received.length} requests after ${ms} ms`);
        await arrival();
      }
    },
    idCounts() {
      const counts = new Map<string, number>();
      for (const r of received) counts.set(String(r.headers["ce-id"]), (counts.get(String(r.headers["ce-id"])) ?? 0) + 1);
      return counts;
    },
    async close() {
      for (const res of hung) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const r: Received = { path: req.url ?? "", headers: req.headers, body: Buffer.concat(chunks), at: Date.now() };
      const answer = sink.answer(r, received.length);
      received.push(r);
      for (const w of waiters) w();
      waiters.clear();
      if (answer === "hang") {
        hung.add(res);
        return;
      }
      const [status, afterMs] = typeof answer === "number" ? [answer, 0] : [answer.status, answer.afterMs];
      const reply = () => res.writeHead(status, { "content-type": "text/plain" }).end(status >= 300 ? `status ${status}` : "ok");
      if (afterMs > 0) setTimeout(reply, afterMs);
      else reply();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const { port } = server.address() as AddressInfo;
  return Object.assign(sink, { url: `http://127.0.0.1:${port}${path}` });
}
