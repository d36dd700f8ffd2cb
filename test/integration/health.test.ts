// gRPC health checking against a real h2c server, through the Connect gRPC client: Check, Watch (updates,
// client going away, shutdown) and List.
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { connectNodeAdapter, createGrpcTransport } from "@connectrpc/connect-node";
import { PingService } from "../../gen/chainguard/platform/ping/v2/ping_pb.js";
import { Health, type HealthCheckResponse } from "../../gen/health/v1/health_pb.js";
import { createHealth, ServingStatus, type HealthService } from "../../src/server/health.js";

const PING = "chainguard.platform.ping.v2.PingService";

interface Running {
  health: HealthService;
  client: Client<typeof Health>;
  close(): Promise<void>;
}

const running: Running[] = [];

async function start(): Promise<Running> {
  const health = createHealth();
  const server = http2.createServer(
    connectNodeAdapter({
      routes(router) {
        router.service(PingService, { ping: () => ({ response: "pong" }) });
        health.register(router);
      },
    }),
  );
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (s) => {
    sessions.add(s);
    s.on("close", () => sessions.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const r: Running = {
    health,
    client: createClient(Health, createGrpcTransport({ baseUrl })),
    async close() {
      for (const s of sessions) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  running.push(r);
  return r;
}

afterEach(async () => {
  await Promise.all(running.splice(0).map((r) => r.close()));
});

/** Reads a server stream message by message, with a deadline on each read. */
function reader(stream: AsyncIterable<HealthCheckResponse>) {
  const it = stream[Symbol.asyncIterator]();
  // A read that timed out stays pending and is picked up by the next call, so no message is skipped.
  let pending: Promise<IteratorResult<HealthCheckResponse>> | undefined;
  const read = async (ms: number): Promise<IteratorResult<HealthCheckResponse> | "timeout"> => {
    const next = (pending ??= it.next());
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), ms);
    });
    try {
      const result = await Promise.race([next, timeout]);
      if (result !== "timeout") pending = undefined;
      return result;
    } finally {
      clearTimeout(timer);
    }
  };
  return {
    async next(ms = 5_000): Promise<IteratorResult<HealthCheckResponse>> {
      const result = await read(ms);
      if (result === "timeout") throw new Error(`no message within ${ms} ms`);
      return result;
    },
    /** "timeout" when nothing arrives within `ms`. */
    quiet: (ms = 200) => read(ms),
  };
}

describe("Check", () => {
  it("answers SERVING for the server and each registered service, NOT_FOUND for unknown ones", async () => {
    const { client } = await start();
    expect((await client.check({ service: "" })).status).toBe(ServingStatus.SERVING);
    expect((await client.check({ service: PING })).status).toBe(ServingStatus.SERVING);
    expect((await client.check({ service: "grpc.health.v1.Health" })).status).toBe(ServingStatus.SERVING);
    const err = await client.check({ service: "no.such.Service" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.NotFound);
  });

  it("reflects setStatus, including for services not on the router", async () => {
    const { client, health } = await start();
    health.setStatus(PING, ServingStatus.NOT_SERVING);
    health.setStatus("batch.Worker", ServingStatus.SERVING);
    expect((await client.check({ service: PING })).status).toBe(ServingStatus.NOT_SERVING);
    expect((await client.check({ service: "batch.Worker" })).status).toBe(ServingStatus.SERVING);
    expect((await client.check({ service: "" })).status).toBe(ServingStatus.SERVING);
  });
});

describe("List", () => {
  it("lists the server and every known service", async () => {
    const { client, health } = await start();
    health.setStatus(PING, ServingStatus.NOT_SERVING);
    const res = await client.list({});
    const statuses = Object.fromEntries(Object.entries(res.statuses).map(([k, v]) => [k, v.status]));
    expect(statuses).toEqual({
      "": ServingStatus.SERVING,
      [PING]: ServingStatus.NOT_SERVING,
      "grpc.health.v1.Health": ServingStatus.SERVING,
    });
  });
});

describe("Watch", () => {
  it("sends the current status, then each change, and nothing for repeats", async () => {
    const { client, health } = await start();
    const abort = new AbortController();
    const watch = reader(client.watch({ service: PING }, { signal: abort.signal }));
    expect((await watch.next()).value?.status).toBe(ServingStatus.SERVING);

    health.setStatus(PING, ServingStatus.NOT_SERVING);
    expect((await watch.next()).value?.status).toBe(ServingStatus.NOT_SERVING);

    health.setStatus(PING, ServingStatus.NOT_SERVING);
    health.setStatus("", ServingStatus.NOT_SERVING);
    expect(await watch.quiet()).toBe("timeout");

    health.setStatus(PING, ServingStatus.SERVING);
    expect((await watch.next()).value?.status).toBe(ServingStatus.SERVING);
    abort.abort();
  });

  it("sends SERVICE_UNKNOWN for an unknown service and keeps watching", async () => {
    const { client, health } = await start();
    const abort = new AbortController();
    const watch = reader(client.watch({ service: "later.Service" }, { signal: abort.signal }));
    expect((await watch.next()).value?.status).toBe(ServingStatus.SERVICE_UNKNOWN);
    health.setStatus("later.Service", ServingStatus.SERVING);
    expect((await watch.next()).value?.status).toBe(ServingStatus.SERVING);
    abort.abort();
  });

  it("ends every watch with NOT_SERVING on shutdown, and Check then answers NOT_SERVING", async () => {
    const { client, health } = await start();
    const a = reader(client.watch({ service: "" }));
    const b = reader(client.watch({ service: PING }));
    expect((await a.next()).value?.status).toBe(ServingStatus.SERVING);
    expect((await b.next()).value?.status).toBe(ServingStatus.SERVING);

    health.shutdown();
    for (const w of [a, b]) {
      expect((await w.next()).value?.status).toBe(ServingStatus.NOT_SERVING);
      expect((await w.next()).done).toBe(true);
    }
    expect((await client.check({ service: "" })).status).toBe(ServingStatus.NOT_SERVING);
    expect((await client.check({ service: PING })).status).toBe(ServingStatus.NOT_SERVING);
    // Updates after shutdown are ignored; a new watch gets NOT_SERVING and ends.
    health.setStatus(PING, ServingStatus.SERVING);
    const c = reader(client.watch({ service: PING }));
    expect((await c.next()).value?.status).toBe(ServingStatus.NOT_SERVING);
    expect((await c.next()).done).toBe(true);
  });

  it("lets the client go away: the watch stops and later updates reach the remaining watchers", async () => {
    const { client, health } = await start();
    const gone = new AbortController();
    const first = reader(client.watch({ service: PING }, { signal: gone.signal }));
    expect((await first.next()).value?.status).toBe(ServingStatus.SERVING);
    gone.abort();
    const err = await first.next().catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.Canceled);

    const abort = new AbortController();
    const second = reader(client.watch({ service: PING }, { signal: abort.signal }));
    expect((await second.next()).value?.status).toBe(ServingStatus.SERVING);
    health.setStatus(PING, ServingStatus.NOT_SERVING);
    expect((await second.next()).value?.status).toBe(ServingStatus.NOT_SERVING);
    abort.abort();
  });
});
