// Raw clients for the fuzzer: node:http (HTTP/1.1, keep-alive) and node:http2 (one cleartext session, reopened
// when the server closes it), much cheaper per request than Connect's clients, and free to send what no
// client would. Every request has a deadline enforced here with an AbortSignal: past it, the request counts
// as unanswered.
import http from "node:http";
import http2 from "node:http2";

export interface RawRequest {
  http: "1.1" | "2";
  method: string;
  /** Path and query. */
  path: string;
  headers: Record<string, string>;
  body?: Uint8Array;
}

export type RawResponse =
  | { kind: "answer"; prev?: string | undefined; status: number; headers: Record<string, string>; trailers: Record<string, string>; body: Buffer }
  /** The connection or stream ended without a response (reset, closed). */
  | { kind: "no-answer"; reason: string }
  | { kind: "timeout" };

function flatten(h: http.IncomingHttpHeaders | http2.IncomingHttpHeaders | Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) if (v !== undefined) out[k] = Array.isArray(v) ? v.join(", ") : String(v);
  return out;
}

export interface WireClient {
  send(req: RawRequest, deadlineMs: number): Promise<RawResponse>;
  close(): void;
}

export function createWireClient(baseUrl: string): WireClient {
  const url = new URL(baseUrl);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
  let session: http2.ClientHttp2Session | undefined;
  const h2 = () => {
    if (!session || session.closed || session.destroyed) {
      const s = http2.connect(baseUrl);
      s.on("error", () => {}); // reported per stream
      s.unref();
      session = s;
    }
    return session;
  };

  const lastOnSocket = new WeakMap<http.ClientRequest, string>();
  const send1 = (req: RawRequest, signal: AbortSignal) =>
    new Promise<RawResponse>((resolve) => {
      const r = http.request(
        // The length is always sent: Node's client sends the body of a GET or DELETE without one, which the
        // server then reads as the start of the next request on the connection.
        { host: url.hostname, port: url.port, method: req.method, path: req.path, headers: { ...req.headers, "content-length": String(req.body?.byteLength ?? 0) }, agent, signal },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => resolve({ prev: lastOnSocket.get(r), kind: "answer", status: res.statusCode ?? 0, headers: flatten(res.headers), trailers: flatten(res.trailers), body: Buffer.concat(chunks) }));
          res.on("error", (err) => resolve(signal.aborted ? { kind: "timeout" } : { kind: "no-answer", reason: `response: ${err.message}` }));
        },
      );
      r.on("socket", (sock) => {
        const prev = (sock as unknown as { fuzzLast?: string }).fuzzLast;
        if (prev) lastOnSocket.set(r, prev);
        (sock as unknown as { fuzzLast?: string }).fuzzLast = `${req.method} ${req.path.slice(0, 100)} ${JSON.stringify(req.headers).slice(0, 300)} body ${req.body?.byteLength}`;
      });
      r.on("error", (err) => resolve(signal.aborted ? { kind: "timeout" } : { kind: "no-answer", reason: err.message }));
      r.end(req.body);
    });

  const send2 = (req: RawRequest, signal: AbortSignal) =>
    new Promise<RawResponse>((resolve) => {
      let stream: http2.ClientHttp2Stream;
      try {
        // endStream is explicit: Node ends a GET or HEAD stream at once unless told otherwise.
        stream = h2().request({ ":method": req.method, ":path": req.path, ...req.headers }, { signal, endStream: false });
      } catch (err) {
        resolve({ kind: "no-answer", reason: `request: ${(err as Error).message}` });
        return;
      }
      let status = 0;
      let headers: Record<string, string> = {};
      let trailers: Record<string, string> = {};
      const chunks: Buffer[] = [];
      stream.on("response", (h) => {
        status = Number(h[":status"]);
        headers = flatten(h);
      });
      stream.on("trailers", (t) => (trailers = flatten(t)));
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => resolve(status ? { kind: "answer", status, headers, trailers, body: Buffer.concat(chunks) } : { kind: "no-answer", reason: "stream ended without headers" }));
      stream.on("error", (err) => resolve(signal.aborted ? { kind: "timeout" } : { kind: "no-answer", reason: `stream: ${err.message}` }));
      stream.on("close", () => {
        if (!status) resolve(signal.aborted ? { kind: "timeout" } : { kind: "no-answer", reason: `stream closed (RST_STREAM code ${stream.rstCode})` });
      });
      stream.end(req.body);
    });

  return {
    async send(req, deadlineMs) {
      const signal = AbortSignal.timeout(deadlineMs);
      const out = await (req.http === "2" ? send2(req, signal) : send1(req, signal));
      return out.kind !== "answer" && signal.aborted ? { kind: "timeout" } : out;
    },
    close() {
      agent.destroy();
      session?.close();
    },
  };
}
