// Sends one delivery request to a sink over HTTP(S), with keep-alive connections per subscription and sink
// origin: a pool of its own for each subscription, so a sink that hangs holds its own connections only, and
// another subscription's deliveries to the same origin (another path, the same host) never wait for them.
//
// Whatever the sink does, the attempt ends within `timeoutMs` (connecting, sending, the answer): a 2xx
// acknowledges; any other status, a timeout, a refused or reset connection is a failure to retry. Redirects
// are never followed (a 3xx is a failure). The answer's body is read only up to a small limit (its start
// explains a failure in the logs and the operator view); a longer one is cut off with its connection.
// Under a public-only policy (production) the address dialled must be public: the agent's lookup refuses
// names resolving to other addresses, and IP literals (which skip the lookup) are checked here.
import http from "node:http";
import https from "node:https";
import { isIP } from "node:net";
import { checkFetchUrl, publicAddressesOf, publicOnlyLookup } from "../../kernel/outbound.js";
import type { SinkPolicy } from "../sinks.js";
import type { DeliveryRequest } from "./cloudevent.js";

/** The outcome of one attempt. */
export type SendResult = { ok: true; status: number } | { ok: false; status: number | null; error: string };

interface SenderOptions {
  policy: SinkPolicy;
  timeoutMs: number;
  /** Connections per subscription (and sink origin): at most the deliveries one subscription may have in flight. */
  maxSocketsPerSubscription: number;
  /** Bytes of an answer's body read at most. */
  maxResponseBytes?: number;
}

const DEFAULT_MAX_RESPONSE_BYTES = 4096;
/** How much of a failed answer's body is kept in its error text. */
const ERROR_SNIPPET_CHARS = 200;

/** Idle connections are closed after this (sooner when the sink's Keep-Alive header says so). */
const IDLE_SOCKET_MS = 30_000;

/** A request's options naming its connection pool: the subscription. */
type PooledOptions = http.ClientRequestArgs & { pool?: string };

// Node's agents pool connections by name (host, port and TLS settings); these add the request's `pool`.
class PooledHttpAgent extends http.Agent {
  override getName(options: PooledOptions = {}): string {
    return `${super.getName(options)}|${options.pool ?? ""}`;
  }
}
class PooledHttpsAgent extends https.Agent {
  override getName(options: PooledOptions = {}): string {
    return `${super.getName(options)}|${options.pool ?? ""}`;
  }
}

export function createSender(opts: SenderOptions) {
  const lookup = opts.policy.publicOnly ? publicOnlyLookup(opts.policy.resolve) : undefined;
  const max = opts.maxSocketsPerSubscription;
  const agentOptions = { keepAlive: true, maxSockets: max, maxFreeSockets: max, timeout: IDLE_SOCKET_MS, scheduling: "lifo" as const, ...(lookup ? { lookup } : {}) };
  const agents = { "http:": new PooledHttpAgent(agentOptions), "https:": new PooledHttpsAgent(agentOptions) };
  const maxResponseBytes = opts.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;

  /** Sends `request` to `sink` over the connections of `pool` (the subscription's uid). */
  async function send(sink: string, request: DeliveryRequest, pool: string): Promise<SendResult> {
    const checked = checkFetchUrl(sink, opts.policy.allowInsecureLoopback);
    if ("refused" in checked) return { ok: false, status: null, error: `sink refused: ${checked.refused}` };
    const url = checked.url;
    if (opts.policy.publicOnly) {
      // IP literals are dialled without a lookup: check them here (names are checked by the agent's lookup).
      try {
        if (isIP(url.hostname.replace(/^\[|\]$/g, ""))) await publicAddressesOf(url.hostname, opts.policy.resolve);
      } catch (err) {
        return { ok: false, status: null, error: `sink refused: ${(err as Error).message}` };
      }
    }
    return new Promise<SendResult>((resolve) => {
      let settled = false;
      const finish = (result: SendResult) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(result);
      };
      const client = url.protocol === "https:" ? https : http;
      const options: PooledOptions = { method: "POST", agent: agents[url.protocol as "http:" | "https:"], headers: request.headers, pool };
      const req = client.request(url, options, (res) => {
        const status = res.statusCode ?? 0;
        const chunks: Buffer[] = [];
        let length = 0;
        res.on("data", (chunk: Buffer) => {
          length += chunk.length;
          if (length <= maxResponseBytes) chunks.push(chunk);
          else res.destroy(); // too long: the connection goes, the status stands
        });
        const done = () => {
          if (status >= 200 && status < 300) return finish({ ok: true, status });
          const text = Buffer.concat(chunks).toString("utf8").slice(0, ERROR_SNIPPET_CHARS).replace(/\s+/g, " ").trim();
          finish({ ok: false, status, error: `HTTP ${status}${text ? `: ${text}` : ""}` });
        };
        res.on("end", done);
        res.on("close", done);
        res.on("error", done);
      });
      const timer = setTimeout(() => {
        finish({ ok: false, status: null, error: `timeout after ${opts.timeoutMs} ms` });
        req.destroy();
      }, opts.timeoutMs);
      req.on("error", (err: NodeJS.ErrnoException) => {
        const refused = err.code === "EFORBIDDENADDRESS";
        finish({ ok: false, status: null, error: refused ? `sink refused: ${err.message}` : `${err.code ?? "error"}: ${err.message}` });
      });
      req.end(request.body);
    });
  }

  return {
    send,
    close() {
      agents["http:"].destroy();
      agents["https:"].destroy();
    },
  };
}
