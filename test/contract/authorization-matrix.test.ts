// The authorization matrix of the IAM services, generated from the descriptors: every method of
// GroupsService, IdentitiesService, RolesService and RoleBindingsService, over REST and gRPC, called by
// eight kinds of caller. What each caller may do follows from the method's `auth` option (its capabilities)
// and the capabilities the caller's bindings grant on the target group, so the expected code is computed,
// not written by hand; the table only says how to build a request aimed at the target group and what an
// authorized caller gets. A guard fails when a method of these services is missing from the table.
import type { DescMethodUnary } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { SignJWT, generateKeyPair } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Capability } from "../../gen/capabilities/capabilities_pb.js";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { IdentitiesService } from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import { RoleBindingsService } from "../../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import { RolesService } from "../../gen/chainguard/platform/iam/v2/roles_pb.js";
import { managedRole } from "../../src/iam/managed-roles.js";
import { ruleOf } from "../../src/kernel/auth/index.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";
import { call, type Protocol } from "./harness.js";

const services = [GroupsService, IdentitiesService, RolesService, RoleBindingsService];

type Caller =
  | "no token"
  | "expired token"
  | "unknown issuer"
  | "viewer of a sibling group"
  | "viewer of the group"
  | "editor"
  | "owner"
  | "identity created under a sibling subgroup";
const callers: readonly Caller[] = [
  "no token",
  "expired token",
  "unknown issuer",
  "viewer of a sibling group",
  "viewer of the group",
  "editor",
  "owner",
  "identity created under a sibling subgroup",
];

/** Capabilities each authenticated caller holds on the target group (world.team), from the managed roles. */
function capabilitiesOnTarget(caller: Caller): ReadonlySet<Capability> {
  switch (caller) {
    case "viewer of the group":
      return new Set(managedRole("viewer").capabilities);
    case "editor":
      return new Set(managedRole("editor").capabilities);
    case "owner":
      return new Set(managedRole("owner").capabilities);
    default:
      return new Set(); // the sibling viewer and the identity confined to the sibling subgroup hold nothing here
  }
}

interface Row {
  /** A request aimed at the target group T (or at a resource under it). */
  request: (w: World) => object;
  /** What an authorized caller gets (several when it depends on earlier calls, e.g. create twice). */
  allowed: Code | "OK" | ReadonlyArray<Code | "OK">;
  /**
   * Capabilities needed on T, for unscoped methods whose handler checks them itself (scoped methods take
   * theirs from the descriptor).
   */
  needs?: readonly Capability[];
}

const bogus = (w: World) => `${w.team}/ffffffffffffffff`;
const C = Capability;

const table: Record<string, Row> = {
  "GroupsService.GetGroup": { request: (w) => ({ uid: w.team }), allowed: "OK" },
  "GroupsService.DeleteGroup": { request: (w) => ({ uid: bogus(w) }), allowed: Code.NotFound },
  "GroupsService.ListGroups": { request: (w) => ({ uidp: { descendantsOf: w.team } }), allowed: "OK" },
  "GroupsService.CreateGroup": {
    request: (w) => ({ parent: w.team, group: { name: "matrix" } }),
    allowed: "OK",
    needs: [C.CAP_IAM_GROUPS_CREATE],
  },
  "GroupsService.UpdateGroup": {
    request: (w) => ({ group: { uid: w.team, description: "matrix" }, updateMask: { paths: ["description"] } }),
    allowed: "OK",
  },
  "GroupsService.LookupGroup": { request: () => ({}), allowed: ["OK", Code.NotFound] },
  "GroupsService.RequestGroupAccess": { request: (w) => ({ groupUid: w.team }), allowed: Code.Unimplemented },
  "GroupsService.CheckEligibility": { request: () => ({}), allowed: "OK" },

  "IdentitiesService.CreateIdentity": {
    request: (w) => ({ parent: w.team, identity: { name: "matrix", relationship: { case: "claimMatch", value: { iss: { case: "issuer", value: "https://issuer.test" }, sub: { case: "subject", value: "matrix" } } } } }),
    allowed: "OK",
  },
  "IdentitiesService.GetIdentity": { request: (w) => ({ uid: bogus(w) }), allowed: Code.NotFound },
  "IdentitiesService.DeleteIdentity": { request: (w) => ({ uid: bogus(w) }), allowed: Code.NotFound },
  "IdentitiesService.UpdateIdentity": {
    request: (w) => ({ identity: { uid: bogus(w), description: "x" }, updateMask: { paths: ["description"] } }),
    allowed: Code.NotFound,
  },
  "IdentitiesService.ListIdentities": { request: (w) => ({ uidp: { descendantsOf: w.team } }), allowed: "OK" },
  "IdentitiesService.LookupIdentity": { request: () => ({ issuer: "https://issuer.test", subject: "nobody" }), allowed: Code.NotFound },
  "IdentitiesService.UpdateIdentityMetadata": {
    request: () => ({ identityMetadata: { company: "matrix" }, updateMask: { paths: ["company"] } }),
    allowed: "OK",
  },

  "RolesService.GetRole": { request: () => ({ uid: managedRole("viewer").uid }), allowed: "OK" },
  "RolesService.ListRoles": { request: () => ({}), allowed: "OK" },
  "RolesService.CreateRole": {
    request: (w) => ({ parent: w.team, role: { name: "matrix", capabilities: [C.CAP_IAM_GROUPS_LIST] } }),
    allowed: "OK",
  },
  "RolesService.UpdateRole": {
    request: (w) => ({ role: { uid: bogus(w), description: "x" }, updateMask: { paths: ["description"] } }),
    allowed: Code.NotFound,
  },
  "RolesService.DeleteRole": { request: (w) => ({ uid: bogus(w) }), allowed: Code.NotFound },

  "RoleBindingsService.GetRoleBinding": { request: (w) => ({ uid: bogus(w) }), allowed: Code.NotFound },
  "RoleBindingsService.CreateRoleBinding": {
    request: (w) => ({ parent: w.team, roleBinding: { identityUid: w.identity.stranger, roleUid: managedRole("viewer").uid } }),
    allowed: ["OK", Code.AlreadyExists],
  },
  "RoleBindingsService.DeleteRoleBinding": { request: (w) => ({ uid: bogus(w) }), allowed: Code.NotFound },
  "RoleBindingsService.ListRoleBindings": { request: (w) => ({ uidp: { descendantsOf: w.team } }), allowed: "OK" },
  "RoleBindingsService.BatchCreateRoleBindings": {
    request: (w) => ({
      parent: w.team,
      requests: [{ parent: w.team, roleBinding: { identityUid: w.identity.stranger, roleUid: managedRole("registry.pull").uid } }],
    }),
    allowed: ["OK", Code.AlreadyExists],
  },
  "RoleBindingsService.UpdateRoleBinding": {
    request: (w) => ({ roleBinding: { uid: bogus(w), roleUid: managedRole("viewer").uid }, updateMask: { paths: ["role_uid"] } }),
    allowed: Code.NotFound,
  },
};

const methods = services.flatMap((s) => s.methods).filter((m): m is DescMethodUnary => m.methodKind === "unary");
const keyOf = (m: DescMethodUnary) => `${m.parent.name}.${m.name}`;

/** The expected outcome for one caller, from the method's rule. */
function expected(method: DescMethodUnary, caller: Caller): ReadonlyArray<Code | "OK"> {
  const row = table[keyOf(method)]!;
  const allowed = Array.isArray(row.allowed) ? row.allowed : [row.allowed as Code | "OK"];
  const rule = ruleOf(method);
  if (rule.kind === "disabled") return allowed;
  if (caller === "no token" || caller === "expired token" || caller === "unknown issuer") return [Code.Unauthenticated];
  const needs = rule.kind === "scoped" ? rule.capabilities : (row.needs ?? []);
  const held = capabilitiesOnTarget(caller);
  return needs.every((c) => held.has(c)) ? allowed : [Code.PermissionDenied];
}

describe("the matrix covers every method", () => {
  it("has a row for each method of the IAM services, and no other", () => {
    expect(Object.keys(table).sort()).toEqual(methods.map(keyOf).sort());
  });
});

let server: TestServer;
let world: World;
const headers = new Map<Caller, Record<string, string>>();

beforeAll(async () => {
  server = await startTestServer();
  world = await seedWorld(server, "matrix-org");
  const { privateKey } = await generateKeyPair("ES256");
  const foreign = await new SignJWT({})
    .setProtectedHeader({ alg: "ES256", kid: "k" })
    .setIssuer("https://unknown-issuer.example.com")
    .setSubject("someone")
    .setAudience(server.baseUrl)
    .setIssuedAt()
    .setExpirationTime("10m")
    .sign(privateKey);
  const bearer = (t: string) => ({ authorization: `Bearer ${t}` });
  headers.set("no token", {});
  headers.set("expired token", bearer(await server.token(world.identity.owner, { ttlSeconds: -600 })));
  headers.set("unknown issuer", bearer(foreign));
  headers.set("viewer of a sibling group", world.auth("otherViewer"));
  headers.set("viewer of the group", world.auth("teamViewer"));
  headers.set("editor", world.auth("editor"));
  headers.set("owner", world.auth("owner"));
  headers.set("identity created under a sibling subgroup", world.auth("confinedOther"));
});
afterAll(async () => {
  await server?.close();
});

describe.each(["grpc", "rest"] as const satisfies readonly Protocol[])("authorization matrix [%s]", (protocol) => {
  describe.each(methods.filter((m) => table[keyOf(m)]))("$parent.name.$name", (method) => {
    it.each(callers)("%s", async (caller) => {
      const want = expected(method, caller);
      const out = await call(protocol, server.baseUrl, method, table[keyOf(method)]!.request(world) as never, headers.get(caller)!);
      const got = out.error ? out.error.code : "OK";
      const name = (c: Code | "OK") => (c === "OK" ? "OK" : Code[c]);
      expect(want.map(name), out.error?.message).toContain(name(got));
    });
  });
});
