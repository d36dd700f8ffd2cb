// Rules every protocol follows alike. Fields a request does not know are ignored: a client built from a
// newer version of the API (here, descriptors with fields this server lacks) keeps working over gRPC,
// gRPC-web, Connect and REST (body keys and query parameters). A JSON value of the wrong type is
// INVALID_ARGUMENT naming its path from the request root in proto field names, over Connect JSON as over REST.
import { gzipSync } from "node:zlib";
import { clone, create, createFileRegistry, type DescFile, type DescMethodUnary, type JsonValue } from "@bufbuild/protobuf";
import {
  FieldDescriptorProto_Label as Label,
  FieldDescriptorProto_Type as Type,
  FieldDescriptorProtoSchema,
  FileDescriptorProtoSchema,
} from "@bufbuild/protobuf/wkt";
import { errorFromJson } from "@connectrpc/connect/protocol-connect";
import { ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  file_chainguard_platform_registry_v2_repos,
  ReposService,
  type CreateRepoRequest,
  type ListReposRequest,
} from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { BadRequestSchema } from "../../gen/google/rpc/error_details_pb.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";
import { contractCase, runContractCases } from "./harness.js";
import { bindPartial } from "../../src/kernel/module.js";

// What the server saw of each call.
const seen: string[] = [];

let server: TestServer;
let world: World;
beforeAll(async () => {
  server = await startTestServer({
    overrides: [
      bindPartial(ReposService, {
        createRepo(req: CreateRepoRequest) {
          seen.push(`CreateRepo ${req.repo?.name} ${req.repo?.catalogTier} ${req.repo?.bundles.join(",")}`);
          return { ...req.repo!, uid: `${req.parent}/new` };
        },
        listRepos(req: ListReposRequest) {
          seen.push(`ListRepos ${req.uidp?.childrenOf} ${req.pageSize}`);
          return { repos: [], totalCount: 0n };
        },
      }),
    ],
  });
  world = await seedWorld(server);
});
afterAll(async () => {
  await server?.close();
});
const owner = () => world.auth("owner");

/** The repos API as a newer version would have it: a new field in a resource and in two requests. */
function newerReposService() {
  const file = clone(FileDescriptorProtoSchema, file_chainguard_platform_registry_v2_repos.proto);
  const add = (message: string, name: string, jsonName: string, type: Type) => {
    const desc = file.messageType.find((m) => m.name === message)!;
    desc.field.push(create(FieldDescriptorProtoSchema, { name, jsonName, number: 1000, type, label: Label.OPTIONAL }));
  };
  add("Repo", "colour", "colour", Type.STRING);
  add("CreateRepoRequest", "dry_run", "dryRun", Type.BOOL);
  add("ListReposRequest", "colour_filter", "colourFilter", Type.STRING);
  const known = new Map<string, DescFile>();
  const visit = (f: DescFile): void => {
    known.set(f.proto.name, f);
    f.dependencies.forEach(visit);
  };
  visit(file_chainguard_platform_registry_v2_repos);
  const registry = createFileRegistry(file, (name) => known.get(name));
  return registry.getService(ReposService.typeName)!;
}
const newer = newerReposService();
const newerMethod = (name: string) => newer.methods.find((m) => m.name === name) as DescMethodUnary;

runContractCases("Fields a request does not know are ignored", () => server.baseUrl, [
  contractCase({
    name: "in the request and in a message within it (REST: a query parameter and a body key)",
    method: newerMethod("CreateRepo"),
    request: () => ({ parent: world.org, dryRun: true, repo: { name: "r", catalogTier: 2, bundles: ["b"], colour: "red" } }),
    headers: owner,
    response: (repo) => {
      expect(repo).toMatchObject({ uid: `${world.org}/new`, name: "r", bundles: ["b"] });
      expect(seen.pop()).toBe("CreateRepo r 2 b");
    },
  }),
  contractCase({
    name: "in a list request (REST: query parameters only)",
    method: newerMethod("ListRepos"),
    request: () => ({ uidp: { childrenOf: world.org }, pageSize: 7, colourFilter: "red" }),
    headers: owner,
    response: () => expect(seen.pop()).toBe(`ListRepos ${world.org} 7`),
  }),
]);

/** The BadRequest field violations of a Connect or REST error body. */
function violatedFields(body: JsonValue, protocol: "connect" | "rest"): string[] {
  if (protocol === "rest") {
    const details = (body as { details: Array<{ "@type": string; fieldViolations?: Array<{ field: string }> }> }).details;
    return details.flatMap((d) => d.fieldViolations?.map((v) => v.field) ?? []);
  }
  const err = errorFromJson(body, undefined, new ConnectError("not a Connect error"));
  return err.findDetails(BadRequestSchema).flatMap((b) => b.fieldViolations.map((v) => v.field));
}

async function post(path: string, body: JsonValue): Promise<{ status: number; body: JsonValue }> {
  const res = await fetch(server.baseUrl + path, {
    method: "POST",
    headers: { "content-type": "application/json", ...owner() },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as JsonValue };
}

describe("a value of the wrong type names its path from the request root, in proto field names", () => {
  const createRepo = `/${ReposService.typeName}/${ReposService.method.createRepo.name}`;
  it.each<[string, JsonValue, string]>([
    ["an enum by its JSON name", { catalogTier: true }, "repo.catalog_tier"],
    ["an enum by its proto name", { catalog_tier: [] }, "repo.catalog_tier"],
    ["a scalar beside an unknown key", { name: 5, colour: "red" }, "repo.name"],
    ["a field of an item of a repeated message", { customOverlay: { accounts: { users: [{ username: "a" }, { uid: "x" }] } } }, "repo.custom_overlay.accounts.users[1].uid"],
  ])("%s: over Connect JSON and REST", async (_, repo, field) => {
    const connect = await post(createRepo, { parent: world.org, repo });
    expect(connect.status).toBe(400);
    expect(violatedFields(connect.body, "connect")).toEqual([field]);
    expect((connect.body as { message: string }).message).toMatch(new RegExp(`^Invalid argument: ${field.replace(/[.[\]]/g, "\\$&")}: `));
    const rest = await post(`/registry/v2/repos/${world.org}`, repo);
    expect(rest.status).toBe(400);
    expect(violatedFields(rest.body, "rest")).toEqual([field]);
  });

  it("a compressed Connect JSON body: located the same way", async () => {
    const res = await fetch(server.baseUrl + createRepo, {
      method: "POST",
      headers: { "content-type": "application/json", "content-encoding": "gzip", ...owner() },
      body: gzipSync(JSON.stringify({ parent: world.org, repo: { catalogTier: true } })),
    });
    expect(res.status).toBe(400);
    expect(violatedFields((await res.json()) as JsonValue, "connect")).toEqual(["repo.catalog_tier"]);
  });

  it("a request field of the wrong type over Connect JSON: update_mask", async () => {
    const updateRepo = `/${ReposService.typeName}/${ReposService.method.updateRepo.name}`;
    const res = await post(updateRepo, { repo: { uid: `${world.org}/r` }, updateMask: 5 });
    expect(res.status).toBe(400);
    expect(violatedFields(res.body, "connect")).toEqual(["update_mask"]);
  });

  it("a query parameter of the wrong type over REST, named by its JSON name", async () => {
    const res = await fetch(`${server.baseUrl}/registry/v2/repos?uidp.childrenOf=${world.org}&pageSize=ten`, { headers: owner() });
    expect(res.status).toBe(400);
    expect(violatedFields((await res.json()) as JsonValue, "rest")).toEqual(["page_size"]);
  });
});
