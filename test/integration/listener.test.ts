// The one port: HTTP/1.1, HTTP/2 cleartext and (when configured) TLS with ALPN, all on the same port and
// all reaching the same handler; junk on the socket never takes the server down.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import http2 from "node:http2";
import https from "node:https";
import net from "node:net";
import { connect as tlsConnect } from "node:tls";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { listen, type Listener, type RequestHandler } from "../../src/server/listener.js";
import { setLogLevel } from "../../src/kernel/log.js";

const handler: RequestHandler = (req, res) => {
  const secure = Boolean((req.socket as { encrypted?: boolean }).encrypted);
  res.writeHead(200, { "content-type": "text/plain" });
  res.end(`${req.httpVersion} ${secure ? "tls" : "clear"} ${req.method} ${req.url}`);
};

function h1Get(port: number, path = "/x"): Promise<string> {
  return new Promise((resolve, reject) => {
    http.get({ host: "127.0.0.1", port, path, agent: false }, (res) => {
      let text = "";
      res.on("data", (c) => (text += c));
      res.on("end", () => resolve(text));
    }).on("error", reject);
  });
}

function h2Get(url: string, path = "/y"): Promise<string> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(url, { rejectUnauthorized: false });
    session.on("error", reject);
    const stream = session.request({ ":path": path });
    let text = "";
    stream.on("data", (c) => (text += c));
    stream.on("end", () => {
      session.close();
      resolve(text);
    });
    stream.on("error", reject);
    stream.end();
  });
}

describe("cleartext port", () => {
  let listener: Listener;
  beforeAll(async () => {
    setLogLevel("silent");
    listener = await listen(handler, { port: 0, host: "127.0.0.1", errorDomain: "platform.local" });
  });
  afterAll(() => listener.close(500));

  it("serves HTTP/1.1", async () => {
    expect(await h1Get(listener.address.port)).toBe("1.1 clear GET /x");
  });

  it("serves HTTP/2 with prior knowledge (h2c) on the same port", async () => {
    expect(await h2Get(`http://127.0.0.1:${listener.address.port}`)).toBe("2.0 clear GET /y");
  });

  it("survives junk, half-written prefaces and silent clients", async () => {
    const port = listener.address.port;
    for (const junk of [Buffer.from([0, 1, 2, 3, 255]), Buffer.from("PRI * HTTP/2.0\r\n"), Buffer.alloc(0), Buffer.from("GARBAGE\r\n\r\n")]) {
      await new Promise<void>((resolve) => {
        const s = net.connect(port, "127.0.0.1", () => {
          s.end(junk);
        });
        s.on("error", () => resolve());
        s.on("close", () => resolve());
        s.resume();
      });
    }
    expect(await h1Get(port)).toBe("1.1 clear GET /x");
    expect(await h2Get(`http://127.0.0.1:${port}`)).toBe("2.0 clear GET /y");
  });

  it("a TLS client is refused cleanly when no certificate is configured", async () => {
    await expect(
      new Promise((resolve, reject) =>
        https.get({ host: "127.0.0.1", port: listener.address.port, rejectUnauthorized: false }, resolve).on("error", reject),
      ),
    ).rejects.toThrow();
    expect(await h1Get(listener.address.port)).toBe("1.1 clear GET /x");
  });
});

describe("with a certificate", () => {
  let listener: Listener;
  let dir: string;
  beforeAll(async () => {
    setLogLevel("silent");
    dir = mkdtempSync(join(tmpdir(), "listener-tls-"));
    execFileSync("openssl", [
      "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
      "-subj", "/CN=localhost", "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem"),
    ], { stdio: "ignore" });
    const tls = { cert: readFileSync(join(dir, "cert.pem")), key: readFileSync(join(dir, "key.pem")) };
    listener = await listen(handler, { port: 0, host: "127.0.0.1", tls, errorDomain: "platform.local" });
  });
  afterAll(async () => {
    await listener.close(500);
    rmSync(dir, { recursive: true, force: true });
  });

  it("serves HTTP/2 over TLS (ALPN h2)", async () => {
    expect(await h2Get(`https://127.0.0.1:${listener.address.port}`)).toBe("2.0 tls GET /y");
  });

  it("serves HTTP/1.1 over TLS", async () => {
    const text = await new Promise<string>((resolve, reject) => {
      https.get({ host: "127.0.0.1", port: listener.address.port, path: "/z", rejectUnauthorized: false, agent: false }, (res) => {
        let t = "";
        res.on("data", (c) => (t += c));
        res.on("end", () => resolve(t));
      }).on("error", reject);
    });
    expect(text).toBe("1.1 tls GET /z");
  });

  it("HTTP/1.1 over TLS keeps the same timeouts: half-sent headers are answered 408 and closed", async () => {
    const tls = { cert: readFileSync(join(dir, "cert.pem")), key: readFileSync(join(dir, "key.pem")) };
    const short = await listen(handler, { port: 0, host: "127.0.0.1", tls, errorDomain: "platform.local", limits: { headersTimeoutMs: 400, requestTimeoutMs: 800 } });
    try {
      const t0 = Date.now();
      const got = await new Promise<string>((resolve) => {
        const socket = tlsConnect({ port: short.address.port, host: "127.0.0.1", rejectUnauthorized: false, ALPNProtocols: ["http/1.1"] }, () =>
          socket.write("GET /x HTTP/1.1\r\nhost: a\r\n"),
        );
        let text = "";
        socket.on("data", (c) => (text += c));
        socket.on("error", () => undefined);
        socket.on("close", () => resolve(text));
      });
      expect(Date.now() - t0).toBeLessThan(400 + 700);
      expect(got).toMatch(/^HTTP\/1\.1 408 /);
      await vi.waitFor(() => expect(short.connections()).toBe(0));
    } finally {
      await short.close(500);
    }
  });

  it("still serves cleartext HTTP/1.1 and h2c on the same port", async () => {
    expect(await h1Get(listener.address.port)).toBe("1.1 clear GET /x");
    expect(await h2Get(`http://127.0.0.1:${listener.address.port}`)).toBe("2.0 clear GET /y");
  });
});

describe("oversized and malformed HTTP/1.1 requests", () => {
  let listener: Listener;
  beforeAll(async () => {
    setLogLevel("silent");
    listener = await listen(handler, { port: 0, host: "127.0.0.1", errorDomain: "platform.local" });
  });
  afterAll(() => listener.close(500));

  it("headers up to 64 KiB reach the handler (a large bearer token is the handler's to refuse)", async () => {
    const res = await fetch(`http://127.0.0.1:${listener.address.port}/big`, { headers: { authorization: `Bearer ${"a".repeat(40_000)}` } });
    expect(res.status).toBe(200);
  });

  it("headers beyond that get 431 with a google.rpc.Status, not a dropped connection", async () => {
    const res = await fetch(`http://127.0.0.1:${listener.address.port}/huge`, { headers: { authorization: `Bearer ${"a".repeat(100_000)}` } });
    expect(res.status).toBe(431);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(await res.json()).toEqual({
      code: 8,
      message: "Request line and headers exceed the limit of 65536 bytes",
      details: [
        {
          "@type": "type.googleapis.com/google.rpc.ErrorInfo",
          reason: "REQUEST_HEADERS_TOO_LARGE",
          domain: "platform.local",
          metadata: { limitBytes: "65536" },
        },
      ],
    });
  });

  it("a URL with its query over the limit (e.g. thousands of filter values) gets the same 431", async () => {
    const query = Array.from({ length: 5000 }, (_, i) => `ids=${"u".repeat(20)}${i}`).join("&");
    const res = await fetch(`http://127.0.0.1:${listener.address.port}/registry/v2/tags?${query}`);
    expect(res.status).toBe(431);
    expect(((await res.json()) as { details: { reason: string }[] }).details[0]!.reason).toBe("REQUEST_HEADERS_TOO_LARGE");
  });

  it("a request the HTTP/1.1 parser cannot read gets 400 with a google.rpc.Status", async () => {
    const text = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(listener.address.port, "127.0.0.1", () => socket.write("GET /x HTTP/1.1\r\nhost: a\r\nbad header line\r\n\r\n"));
      let got = "";
      socket.on("data", (c) => (got += c));
      socket.on("end", () => resolve(got));
      socket.on("error", reject);
    });
    expect(text).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    const body = JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4)) as { code: number; details: { reason: string }[] };
    expect(body.code).toBe(3);
    expect(body.details[0]!.reason).toBe("MALFORMED_HTTP_REQUEST");
  });
});

describe("closing", () => {
  it("closes idle keep-alive HTTP/1.1 connections at once, without waiting for the grace period", async () => {
    const l = await listen(handler, { port: 0, host: "127.0.0.1", errorDomain: "platform.local" });
    const agent = new http.Agent({ keepAlive: true });
    const got = await new Promise<string>((resolve, reject) => {
      http.get({ host: "127.0.0.1", port: l.address.port, path: "/idle", agent }, (res) => {
        let text = "";
        res.on("data", (c) => (text += c));
        res.on("end", () => resolve(text));
      }).on("error", reject);
    });
    expect(got).toContain("/idle");
    // The connection stays open in the agent, idle. A close with a grace of a minute ends long before it.
    let closed = false;
    const closing = l.close(60_000).then(() => (closed = true));
    await Promise.race([closing, new Promise((r) => setTimeout(r, 10_000))]);
    agent.destroy();
    expect(closed).toBe(true);
  });
});

describe("slow clients (slowloris)", () => {
  // Short limits, so that each case shows its timeout being kept; the defaults (seconds) work the same way.
  const limits = { headersTimeoutMs: 400, requestTimeoutMs: 800, idleTimeoutMs: 600, maxPerAddress: 1000 };
  // Node checks HTTP/1.1 requests for their time every 100 ms here (a quarter of the headers timeout), and a
  // loaded machine adds its own delay.
  const SLACK_MS = 700;
  let listener: Listener;
  beforeAll(async () => {
    setLogLevel("silent");
    // As the API's handlers do: read the whole body, then answer.
    const reading: RequestHandler = (req, res) => {
      let size = 0;
      req.on("data", (c: Buffer) => (size += c.length));
      req.on("end", () => {
        if (res.writableEnded || (res as http2.Http2ServerResponse).stream?.destroyed) return;
        res.writeHead(200, { "content-type": "text/plain" });
        res.end(`read ${size}`);
      });
    };
    listener = await listen(reading, { port: 0, host: "127.0.0.1", errorDomain: "platform.local", limits });
  });
  afterAll(() => listener.close(500));

  /** Opens a raw connection, runs `start` on it, and resolves when the server closes it: after how long, with what. */
  function held(start: (socket: net.Socket) => void): Promise<{ ms: number; got: string }> {
    return new Promise((resolve) => {
      const t0 = Date.now();
      let got = "";
      const socket = net.connect(listener.address.port, "127.0.0.1", () => start(socket));
      socket.on("data", (c) => (got += c));
      socket.on("error", () => undefined);
      socket.on("close", () => resolve({ ms: Date.now() - t0, got }));
    });
  }
  /** Writes `text` every `everyMs` until the connection closes. */
  function trickle(socket: net.Socket, text: string, everyMs: number): void {
    const timer = setInterval(() => (socket.destroyed ? clearInterval(timer) : socket.write(text)), everyMs);
  }
  const statusLine = (got: string) => got.split("\r\n")[0];
  const reason = (got: string) => (JSON.parse(got.slice(got.indexOf("\r\n\r\n") + 4)) as { details: { reason: string }[] }).details[0]!.reason;

  it("closes every connection that does not send its request in time, each within its timeout, and holds no socket after", async () => {
    const h2Stream = (contentType: string) =>
      new Promise<{ ms: number; status: number | undefined; headers: http2.IncomingHttpHeaders; body: string }>((resolve) => {
        const t0 = Date.now();
        const session = http2.connect(`http://127.0.0.1:${listener.address.port}`);
        session.on("error", () => undefined);
        const stream = session.request({ ":method": "POST", ":path": "/slow", "content-type": contentType });
        stream.write("part of a request, never ended"); // no END_STREAM
        let headers: http2.IncomingHttpHeaders = {};
        let body = "";
        stream.on("response", (h) => (headers = { ...headers, ...h }));
        stream.on("trailers", (t) => (headers = { ...headers, ...t }));
        stream.on("data", (c) => (body += c));
        stream.on("error", () => undefined);
        stream.on("close", () => {
          resolve({ ms: Date.now() - t0, status: headers[":status"] as number | undefined, headers, body });
          session.close();
        });
      });
    const idleH2 = new Promise<{ ms: number; answer: string }>((resolve) => {
      const session = http2.connect(`http://127.0.0.1:${listener.address.port}`);
      session.on("error", () => undefined);
      const stream = session.request({ ":path": "/quick" });
      let answer = "";
      stream.on("data", (c) => (answer += c));
      stream.end();
      let t0 = 0;
      stream.on("close", () => (t0 = Date.now()));
      // A ping now and then keeps no request going: the session is still idle.
      // Once the server has closed the session, a ping throws (ERR_HTTP2_INVALID_SESSION) before "close" is emitted.
      const pings = setInterval(() => {
        if (!session.closed && !session.destroyed) session.ping(() => undefined);
      }, 100);
      session.on("close", () => {
        clearInterval(pings);
        resolve({ ms: Date.now() - t0, answer });
      });
    });

    const [silent, oneByte, prefacePart, halfHeaders, trickledHeaders, trickledBody, grpcStream, restStream, idleH1, blankLines, h2Idle] = await Promise.all([
      held(() => undefined),
      held((s) => s.write("G")),
      // A prefix of the HTTP/2 preface, a byte at a time: the protocol is never told.
      held((s) => {
        let i = 0;
        const preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
        const timer = setInterval(() => (s.destroyed || i >= preface.length - 1 ? clearInterval(timer) : s.write(preface[i++]!)), 50);
      }),
      held((s) => s.write("GET /x HTTP/1.1\r\nhost: a\r\n")),
      held((s) => {
        s.write("GET /x HTTP/1.1\r\n");
        trickle(s, "x-a: b\r\n", 50);
      }),
      held((s) => {
        s.write("POST /x HTTP/1.1\r\nhost: a\r\ncontent-length: 1000\r\n\r\n");
        trickle(s, "x", 50);
      }),
      h2Stream("application/grpc"),
      h2Stream("application/json"),
      held((s) => s.write("GET /x HTTP/1.1\r\nhost: a\r\n\r\n")),
      // After an answered request, blank lines (which start no request) to keep the connection open.
      held((s) => {
        s.write("GET /x HTTP/1.1\r\nhost: a\r\n\r\n");
        trickle(s, "\r\n", 50);
      }),
      idleH2,
    ]);

    expect(silent.ms).toBeLessThan(limits.headersTimeoutMs + SLACK_MS);
    expect(oneByte.ms).toBeLessThan(limits.headersTimeoutMs + SLACK_MS);
    expect(statusLine(oneByte.got)).toBe("HTTP/1.1 408 Request Timeout");
    expect(prefacePart.ms).toBeLessThan(limits.headersTimeoutMs + SLACK_MS);
    for (const c of [halfHeaders, trickledHeaders]) {
      expect(c.ms).toBeLessThan(limits.headersTimeoutMs + SLACK_MS);
      expect(statusLine(c.got)).toBe("HTTP/1.1 408 Request Timeout");
      expect(reason(c.got)).toBe("REQUEST_TIMEOUT");
    }
    expect(trickledBody.ms).toBeGreaterThanOrEqual(limits.requestTimeoutMs - 50);
    expect(trickledBody.ms).toBeLessThan(limits.requestTimeoutMs + SLACK_MS);
    expect(statusLine(trickledBody.got)).toBe("HTTP/1.1 408 Request Timeout");
    expect(reason(trickledBody.got)).toBe("REQUEST_TIMEOUT");

    expect(grpcStream.ms).toBeLessThan(limits.requestTimeoutMs + SLACK_MS);
    expect(grpcStream.status).toBe(200);
    expect(grpcStream.headers["grpc-status"]).toBe("4"); // DEADLINE_EXCEEDED
    expect(restStream.ms).toBeLessThan(limits.requestTimeoutMs + SLACK_MS);
    expect(restStream.status).toBe(408);
    expect((JSON.parse(restStream.body) as { details: { reason: string }[] }).details[0]!.reason).toBe("REQUEST_TIMEOUT");

    // Idle: Node keeps an idle HTTP/1.1 connection a second past its keep-alive timeout.
    expect(statusLine(idleH1.got)).toBe("HTTP/1.1 200 OK");
    expect(idleH1.ms).toBeLessThan(limits.idleTimeoutMs + 1_000 + SLACK_MS);
    expect(statusLine(blankLines.got)).toBe("HTTP/1.1 200 OK");
    expect(blankLines.ms).toBeLessThan(limits.idleTimeoutMs + limits.headersTimeoutMs + SLACK_MS);
    expect(h2Idle.answer).toBe("read 0");
    expect(h2Idle.ms).toBeLessThan(limits.idleTimeoutMs + SLACK_MS);

    await vi.waitFor(() => expect(listener.connections()).toBe(0), { timeout: 2_000 });
  });

  it("a request sent at a normal pace within the limits is answered", async () => {
    const got = await held((s) => {
      s.write("POST /x HTTP/1.1\r\nhost: a\r\nconnection: close\r\ncontent-length: 4\r\n\r\n");
      let i = 0;
      const timer = setInterval(() => (i < 4 ? s.write("y") : clearInterval(timer), i++), 100);
    });
    expect(statusLine(got.got)).toBe("HTTP/1.1 200 OK");
    expect(got.got).toContain("read 4");
  });
});

describe("connections per address", () => {
  it("refuses a connection over the cap at once, and takes one again when another closes", async () => {
    setLogLevel("silent");
    const l = await listen(handler, { port: 0, host: "127.0.0.1", errorDomain: "platform.local", limits: { maxPerAddress: 3 } });
    try {
      const open = (): Promise<net.Socket> =>
        new Promise((resolve, reject) => {
          const s = net.connect(l.address.port, "127.0.0.1", () => resolve(s));
          s.on("error", reject);
        });
      const kept = await Promise.all([open(), open(), open()]);
      await vi.waitFor(() => expect(l.connections()).toBe(3));
      const over = await open();
      const closed = await new Promise<boolean>((resolve) => {
        over.on("close", () => resolve(true));
        over.on("error", () => undefined);
        setTimeout(() => resolve(false), 2_000);
      });
      expect(closed).toBe(true);
      expect(l.connections()).toBe(3);
      kept[0]!.destroy();
      await vi.waitFor(() => expect(l.connections()).toBe(2));
      expect(await h1Get(l.address.port)).toBe("1.1 clear GET /x");
      for (const s of kept) s.destroy();
    } finally {
      await l.close(500);
    }
  });
});

describe("streaming bodies (registry blob uploads)", () => {
  const limits = { headersTimeoutMs: 400, requestTimeoutMs: 600, idleTimeoutMs: 600, maxPerAddress: 1000 };
  let listener: Listener;
  beforeAll(async () => {
    setLogLevel("silent");
    const reading: RequestHandler = (req, res) => {
      let size = 0;
      req.on("data", (c: Buffer) => (size += c.length));
      req.on("end", () => {
        if (res.writableEnded || (res as http2.Http2ServerResponse).stream?.destroyed) return;
        res.writeHead(200, { "content-type": "text/plain" });
        res.end(`read ${size}`);
      });
    };
    listener = await listen(reading, { port: 0, host: "127.0.0.1", errorDomain: "platform.local", limits, streamsBody: (method, path) => method === "PATCH" && path.startsWith("/stream") });
  });
  afterAll(() => listener.close(500));

  /** An HTTP/1.1 request whose chunked body is written a piece every 100 ms, `pieces` times, then ended (or not). */
  function h1Trickle(path: string, pieces: number, end: boolean): Promise<{ ms: number; got: string }> {
    return new Promise((resolve) => {
      const t0 = Date.now();
      let got = "";
      const socket = net.connect(listener.address.port, "127.0.0.1", () => {
        socket.write(`PATCH ${path} HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n`);
        let sent = 0;
        const timer = setInterval(() => {
          if (socket.destroyed) return clearInterval(timer);
          if (sent < pieces) {
            socket.write("5\r\nhello\r\n");
            sent += 1;
          } else {
            clearInterval(timer);
            if (end) socket.write("0\r\n\r\n");
          }
        }, 100);
      });
      socket.on("data", (c) => {
        got += c;
        if (got.includes("read ")) socket.end();
      });
      socket.on("error", () => undefined);
      socket.on("close", () => resolve({ ms: Date.now() - t0, got }));
    });
  }

  it("a streaming HTTP/1.1 body that keeps coming outlives the request timeout and is answered", async () => {
    const r = await h1Trickle("/stream/upload", 12, true);
    expect(r.got).toMatch(/^HTTP\/1\.1 200 /);
    expect(r.got).toContain("read 60");
    expect(r.ms).toBeGreaterThan(limits.requestTimeoutMs);
  });

  it("a streaming body that stalls for the request timeout is cut off; other bodies keep the whole-request deadline (408)", async () => {
    const [stalled, other] = await Promise.all([h1Trickle("/stream/upload", 1, false), h1Trickle("/other", 20, true)]);
    expect(stalled.got).toBe("");
    expect(other.got.split("\r\n")[0]).toBe("HTTP/1.1 408 Request Timeout");
  });

  it("an HTTP/2 streaming body outlives the request timeout too", async () => {
    const session = http2.connect(`http://127.0.0.1:${listener.address.port}`);
    try {
      const answer = await new Promise<string>((resolve, reject) => {
        const stream = session.request({ ":method": "PATCH", ":path": "/stream/h2" });
        let text = "";
        stream.on("data", (c) => (text += c));
        stream.on("end", () => resolve(text));
        stream.on("error", reject);
        let sent = 0;
        const timer = setInterval(() => {
          if (sent++ < 12) stream.write("hello");
          else {
            clearInterval(timer);
            stream.end();
          }
        }, 100);
      });
      expect(answer).toBe("read 60");
    } finally {
      session.close();
    }
  });
});
