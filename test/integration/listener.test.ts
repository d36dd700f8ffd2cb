// The one port: HTTP/1.1, HTTP/2 cleartext and (when configured) TLS with ALPN, all on the same port and
// all reaching the same handler; junk on the socket never takes the server down.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import http2 from "node:http2";
import https from "node:https";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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
