// The database going away and coming back, on real PostgreSQL, through a TCP proxy the test cuts: a server
// process answers UNAVAILABLE (HTTP 503) at once instead of hanging, says NOT_SERVING on /healthz and the
// gRPC health check, and recovers by itself when the database returns: calls answer again, health is
// SERVING again, and its grants subscription (LISTEN) is back, so a removed binding stops granting at once.
import { Code } from "@connectrpc/connect";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { Health, HealthCheckResponse_ServingStatus as ServingStatus } from "../../gen/health/v1/health_pb.js";
import { ErrorInfoSchema, RetryInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { roleBindings } from "../../src/db/schema/index.js";
import { call, detail, type Protocol } from "../contract/harness.js";
import { until, within } from "../support/poll.js";
import { createScratchDatabase, openDirect, startServerProcess, type DirectAccess, type ScratchDatabase, type ServerProcess } from "../support/server-process.js";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";
import type { World } from "../support/world.js";

/** A call that does not answer within this is a hang (the server used to wait 20 s and more). */
const HANG_MS = 5_000;
/** Longer than the server's probe interval and connect timeout; shorter than the grants cache's 10 s. */
const DEADLINE_MS = 5_000;

describe.skipIf(!process.env.DATABASE_URL)("database outage (PostgreSQL through a proxy)", () => {
  let scratch: ScratchDatabase;
  let proxy: TcpProxy;
  let server: ServerProcess;
  let direct: DirectAccess;
  let world: World;

  beforeAll(async () => {
    scratch = await createScratchDatabase();
    const target = new URL(scratch.url);
    proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
    server = await startServerProcess(scratch.via("127.0.0.1", proxy.port));
    direct = await openDirect(scratch.url);
    world = await direct.world();
  }, 60_000);
  afterAll(async () => {
    await server?.kill();
    await proxy?.close();
    await direct?.close();
    await scratch?.dispose();
  });

  const getOrg = (protocol: Protocol) =>
    within(`GetGroup over ${protocol}`, HANG_MS, call(protocol, server.baseUrl, GroupsService.method.getGroup, { uid: world.org }, world.auth("viewer")));
  const grpcHealth = async () => {
    const out = await within("health check", HANG_MS, call("grpc", server.baseUrl, Health.method.check, { service: "" }));
    return out.message?.status ?? `error ${out.error?.code}`;
  };
  const healthz = async () => (await within("/healthz", HANG_MS, fetch(`${server.baseUrl}/healthz`))).status;

  it("serves while the database is there", async () => {
    for (const p of ["grpc", "rest"] as const) expect((await getOrg(p)).error).toBeUndefined();
    expect(await grpcHealth()).toBe(ServingStatus.SERVING);
    expect(await healthz()).toBe(200);
  });

  it("answers UNAVAILABLE (503) without hanging, and NOT_SERVING, while the database is unreachable", async () => {
    await proxy.cut();
    for (const protocol of ["grpc", "grpc-web", "connect-json", "rest"] as const) {
      const out = await getOrg(protocol);
      expect(out.error?.code, protocol).toBe(Code.Unavailable);
      expect(detail(out.error!, ErrorInfoSchema)?.reason, protocol).toBe("DATABASE_UNAVAILABLE");
      expect(detail(out.error!, RetryInfoSchema), protocol).toBeDefined();
      if (protocol === "rest") expect(out.error?.httpStatus).toBe(503);
    }
    expect(await healthz()).toBe(503);
    await until("gRPC health", grpcHealth, (s) => s === ServingStatus.NOT_SERVING, DEADLINE_MS);
    // The cause is logged (the driver's error), not sent.
    expect(server.logs()).toMatch(/^(?=.*"msg":"database error mapped")(?=.*ECONNREFUSED).*$/m);
  });

  it("recovers by itself when the database returns: calls, health, and the grants subscription", async () => {
    await proxy.restore();
    await until("GetGroup", async () => (await getOrg("rest")).error?.code ?? "ok", (c) => c === "ok", DEADLINE_MS);
    await until("gRPC health", grpcHealth, (s) => s === ServingStatus.SERVING, DEADLINE_MS);
    expect(await healthz()).toBe(200);

    // The server listens for changes again: its LISTEN connection is back and idle, every channel (grants,
    // keys, events) listened to again in turn (without it the server would read grants on every request,
    // and the check below could not tell). pg_stat_activity shows the connection's last statement only.
    const listening = async () =>
      (await scratch.sql`select count(*)::int as n from pg_stat_activity where datname = current_database() and state = 'idle' and query ilike 'listen %'`)[0]!.n as number;
    await until("LISTEN re-established", listening, (n) => n > 0, DEADLINE_MS);
    // The viewer's grants are remembered now (this call); removing its binding behind the server's back must
    // reach it through the re-established LISTEN, well before the cache's 10 s would forget them anyway.
    expect((await getOrg("grpc")).error).toBeUndefined();
    await direct.db.delete(roleBindings).where(eq(roleBindings.identityUid, world.identity.viewer));
    await until("the removed binding refused", async () => (await getOrg("grpc")).error?.code, (c) => c === Code.PermissionDenied, DEADLINE_MS);
  }, 30_000);
});
