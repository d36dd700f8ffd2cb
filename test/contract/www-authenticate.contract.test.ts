// A 401 says how to authenticate (RFC 6750 section 3): `WWW-Authenticate: Bearer` on every UNAUTHENTICATED
// answer that is an HTTP response (REST and Connect), with error="invalid_token" when the request presented a
// bearer token that was refused. gRPC and gRPC-web answer HTTP 200 and carry the status in trailers, where the
// header has no meaning: their clients read grpc-status 16.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../support/server.js";

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server?.close();
});

const LIST_GROUPS = "/chainguard.platform.iam.v2.GroupsService/ListGroups";

async function rest(headers: Record<string, string>): Promise<Response> {
  return fetch(`${server.baseUrl}/iam/v2/groups`, { headers });
}

async function connect(headers: Record<string, string>, contentType = "application/json"): Promise<Response> {
  return fetch(`${server.baseUrl}${LIST_GROUPS}`, {
    method: "POST",
    headers: { "content-type": contentType, ...headers },
    body: contentType === "application/json" ? "{}" : new Uint8Array(0),
  });
}

describe("WWW-Authenticate on a 401", () => {
  it.each([
    ["REST", rest],
    ["Connect JSON", (h: Record<string, string>) => connect(h)],
    ["Connect binary", (h: Record<string, string>) => connect(h, "application/proto")],
  ])("%s: no credentials -> Bearer, with no error code", async (_name, send) => {
    const res = await send({});
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toBe("Bearer");
  });

  it.each([
    ["REST", rest],
    ["Connect JSON", (h: Record<string, string>) => connect(h)],
    ["Connect binary", (h: Record<string, string>) => connect(h, "application/proto")],
  ])("%s: a refused bearer token -> Bearer error=\"invalid_token\"", async (_name, send) => {
    const res = await send({ authorization: "Bearer not-a-token" });
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toBe('Bearer error="invalid_token"');
  });

  it("an expired token of this server is an invalid_token too", async () => {
    const res = await rest({ authorization: `Bearer ${await server.token("nobody", { ttlSeconds: -3600 })}` });
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toBe('Bearer error="invalid_token"');
  });

  it("another scheme is not a bearer token: the plain challenge", async () => {
    const res = await rest({ authorization: "Basic dXNlcjpwYXNz" });
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toBe("Bearer");
  });

  it("other errors carry no challenge", async () => {
    const res = await fetch(`${server.baseUrl}/ping/v2/ping`);
    expect(res.status).toBe(200);
    expect(res.headers.get("www-authenticate")).toBeNull();
    const notFound = await fetch(`${server.baseUrl}/iam/v2/nothing-here`);
    expect(notFound.status).toBe(404);
    expect(notFound.headers.get("www-authenticate")).toBeNull();
  });
});
