// Rules every protocol follows alike. Fields a request does not know are ignored: a client built from a
// newer version of the API (here, descriptors with fields this server lacks) keeps working over gRPC,
// gRPC-web, Connect and REST (body keys and query parameters).
import { clone, create, createFileRegistry, type DescFile, type DescMethodUnary } from "@bufbuild/protobuf";
import {
  FieldDescriptorProto_Label as Label,
  FieldDescriptorProto_Type as Type,
  FieldDescriptorProtoSchema,
  FileDescriptorProtoSchema,
} from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, expect } from "vitest";
import {
  file_chainguard_platform_registry_v2_repos,
  ReposService,
  type CreateRepoRequest,
  type ListReposRequest,
} from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";
import { contractCase, runContractCases } from "./harness.js";

// What the server saw of each call.
const seen: string[] = [];

let server: TestServer;
let world: World;
beforeAll(async () => {
  server = await startTestServer({
    overrides: [
      {
        service: ReposService,
        impl: {
          createRepo(req: CreateRepoRequest) {
            seen.push(`CreateRepo ${req.repo?.name} ${req.repo?.catalogTier} ${req.repo?.bundles.join(",")}`);
            return { ...req.repo, uid: `${req.parent}/new` };
          },
          listRepos(req: ListReposRequest) {
            seen.push(`ListRepos ${req.uidp?.childrenOf} ${req.pageSize}`);
            return { repos: [], totalCount: 0n };
          },
        },
      },
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
