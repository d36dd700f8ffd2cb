// REST-only behaviour of the real server: routes come from the google.api.http bindings (no route is
// written by hand), query parameters are typed by the request message, and every failure is a
// google.rpc.Status body with the HTTP status of its code.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ReposService, type ListReposRequest } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { ArtifactsService } from "../../gen/chainguard/platform/libraries/v2/artifacts_pb.js";
import { SubscriptionsService } from "../../gen/chainguard/platform/events/v2/subscriptions_pb.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";
import { bindPartial } from "../../src/kernel/module.js";

let server: TestServer;
let world: World;
const seen: string[] = [];

beforeAll(async () => {
  server = await startTestServer({
    overrides: [
      bindPartial(ReposService, {
          getRepo: (req: { uid: string }) => {
            seen.push(`GetRepo ${req.uid}`);
            return { uid: req.uid, name: "r" };
          },
          listRepos: (req: ListReposRequest) => {
            seen.push(`ListRepos ${req.uidp?.descendantsOf ?? ""} ${req.pageSize} ${req.name ?? ""}`);
            return { repos: [], totalCount: 12345678901n, skipped: req.skip };
          },
          updateRepo: (req: { repo?: { uid: string; description: string }; updateMask?: { paths: string[] } }) => {
            seen.push(`UpdateRepo ${req.repo?.uid} mask=${req.updateMask?.paths.join(",")}`);
            return { ...req.repo, name: "r" };
          },
      }),
      bindPartial(ArtifactsService, {
          listArtifacts: (req: { ecosystems: number[] }) => {
            seen.push(`ListArtifacts ${req.ecosystems.join(",")}`);
            return { artifacts: [] };
          },
      }),
      // No methods: bound as the server binds every service no domain builds.
      bindPartial(SubscriptionsService, {}),
    ],
  });
  world = await seedWorld(server);
});
afterAll(async () => {
  await server?.close();
});

async function rest(method: string, path: string, body?: string, contentType = "application/json") {
  const res = await fetch(server.baseUrl + path, {
    method,
    headers: { ...world.auth("owner"), ...(body !== undefined ? { "content-type": contentType } : {}) },
    ...(body !== undefined ? { body } : {}),
  });
  return { status: res.status, headers: res.headers, json: (await res.json()) as Record<string, unknown> };
}

describe("routing from the HTTP bindings", () => {
  it("GET /registry/v2/repos is ListRepos, not GetRepo with an empty uid", async () => {
    seen.length = 0;
    const res = await rest("GET", "/registry/v2/repos?uidp.descendants_of=abc&page_size=7&name=n");
    expect(res.status).toBe(200);
    expect(seen).toEqual(["ListRepos abc 7 n"]);
    // proto3 JSON: camelCase, int64 as a string, default-valued fields included
    expect(res.json).toEqual({ repos: [], nextPageToken: "", totalCount: "12345678901", skipped: 0 });
  });

  it("a multi-segment uid reaches GetRepo whole", async () => {
    seen.length = 0;
    const res = await rest("GET", `/registry/v2/repos/${world.org}/9f8e7d6c5b4a3210`);
    expect(res.status).toBe(200);
    expect(seen).toEqual([`GetRepo ${world.org}/9f8e7d6c5b4a3210`]);
    expect(res.json).toMatchObject({ uid: `${world.org}/9f8e7d6c5b4a3210`, name: "r", description: "", bundles: [] });
  });

  it("PATCH without updateMask changes only the fields present in the body", async () => {
    seen.length = 0;
    const res = await rest("PATCH", `/registry/v2/repos/${world.org}/repo`, JSON.stringify({ description: "new" }));
    expect(res.status).toBe(200);
    expect(seen).toEqual([`UpdateRepo ${world.org}/repo mask=description`]);
  });

  it("PATCH: keys and query parameters naming no field are ignored, and stay out of the derived mask", async () => {
    seen.length = 0;
    const res = await rest("PATCH", `/registry/v2/repos/${world.org}/repo?pagesize=3`, JSON.stringify({ description: "new", colour: "red" }));
    expect(res.status).toBe(200);
    expect(seen).toEqual([`UpdateRepo ${world.org}/repo mask=description`]);
  });

  it("a binding with a body reads it as JSON whatever its content type says (curl -d labels JSON a form), as grpc-gateway does", async () => {
    seen.length = 0;
    const res = await rest("PATCH", `/registry/v2/repos/${world.org}/repo`, JSON.stringify({ description: "new" }), "application/x-www-form-urlencoded");
    expect(res.status).toBe(200);
    expect(seen).toEqual([`UpdateRepo ${world.org}/repo mask=description`]);
  });

  it("PATCH with updateMask passes the mask through", async () => {
    seen.length = 0;
    await rest("PATCH", `/registry/v2/repos/${world.org}/repo?updateMask=description,name`, JSON.stringify({ description: "x" }));
    expect(seen).toEqual([`UpdateRepo ${world.org}/repo mask=description,name`]);
  });

  it("repeated query parameters fill repeated fields, enums by name", async () => {
    seen.length = 0;
    const res = await rest("GET", "/libraries/v2/artifacts?ecosystems=ECOSYSTEM_JAVA&ecosystems=ECOSYSTEM_PYTHON");
    expect(res.status).toBe(200);
    expect(seen).toEqual(["ListArtifacts 1,2"]);
  });
});

describe("REST errors", () => {
  const statusBody = (json: Record<string, unknown>) => {
    const details = json.details as Array<Record<string, unknown>>;
    expect(details[0]).toMatchObject({ "@type": "type.googleapis.com/google.rpc.ErrorInfo" });
    expect(String(details[0]!.domain)).not.toBe("");
    return details;
  };

  it("unknown path: 404 with a structured body", async () => {
    const res = await rest("GET", "/registry/v2/nothing-here");
    expect(res.status).toBe(404);
    expect(res.json.code).toBe(5);
    statusBody(res.json);
  });

  it("a route's path with a trailing slash: 404 saying to drop it", async () => {
    for (const path of ["/registry/v2/repos/", `/registry/v2/repos/${world.org}/abc//`]) {
      const res = await rest("GET", path);
      expect(res.status).toBe(404);
      const trimmed = path.replace(/\/+$/, "");
      expect(res.json.message).toBe(`No REST route for GET ${path}: drop the trailing slash (GET ${trimmed} is a route)`);
      expect(statusBody(res.json)[0]).toMatchObject({ reason: "ROUTE_NOT_FOUND", metadata: { path, suggestedPath: trimmed } });
    }
    // No hint where the path without the slash is no route either.
    const res = await rest("GET", "/registry/v2/nothing-here/");
    expect(res.json.message).toBe("No REST route for GET /registry/v2/nothing-here/");
  });

  it("known path, wrong method: 405 with Allow", async () => {
    const res = await rest("PUT", "/registry/v2/repos/abc");
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toMatch(/GET/);
    expect(res.headers.get("allow")).toMatch(/PATCH/);
    statusBody(res.json);
  });

  it("malformed JSON: 400 INVALID_ARGUMENT on the body", async () => {
    const res = await rest("PATCH", `/registry/v2/repos/${world.org}/abc`, "{oops");
    expect(res.status).toBe(400);
    expect(res.json.code).toBe(3);
    expect(String(res.json.message)).toMatch(/^Invalid argument: body: /);
    const details = statusBody(res.json);
    expect(details[1]).toMatchObject({ "@type": "type.googleapis.com/google.rpc.BadRequest", fieldViolations: [{ field: "body" }] });
  });

  it("a form-encoded body where the binding's body is JSON: 400 saying so, nothing called", async () => {
    seen.length = 0;
    const res = await rest("PATCH", `/registry/v2/repos/${world.org}/abc`, "description=new", "application/x-www-form-urlencoded; charset=utf-8");
    expect(res.status).toBe(400);
    expect(String(res.json.message)).toMatch(/^Invalid argument: body: is form-encoded .* proto3 JSON/);
    expect(seen).toEqual([]);
  });

  it("a JSON value of the wrong type: 400 naming the field", async () => {
    const res = await rest("PATCH", `/registry/v2/repos/${world.org}/abc`, JSON.stringify({ description: 42 }));
    expect(res.status).toBe(400);
    expect(String(res.json.message)).toMatch(/^Invalid argument: repo\.description: /);
  });

  it("a query value of the wrong type: 400 naming the field", async () => {
    const res = await rest("GET", "/registry/v2/repos?page_size=lots");
    expect(res.status).toBe(400);
    expect(String(res.json.message)).toMatch(/^Invalid argument: page_size: /);
    const details = statusBody(res.json);
    expect(details[1]).toMatchObject({ fieldViolations: [{ field: "page_size" }] });
  });

  it("a query parameter naming a field inside a scalar: 400 naming it in proto names", async () => {
    const res = await rest("GET", "/registry/v2/repos?uidp.childrenOf.x=3");
    expect(res.status).toBe(400);
    const details = statusBody(res.json);
    expect(details[1]).toMatchObject({ fieldViolations: [{ field: "uidp.children_of.x" }] });
  });

  it("a method no domain implements yet: 501 UNIMPLEMENTED", async () => {
    const res = await rest("GET", "/events/v2/subscriptions");
    expect(res.status).toBe(501);
    expect(res.json.code).toBe(12);
    statusBody(res.json);
  });
});
