// IdentitiesService over every protocol: create (name pattern, one validated relationship), get, list
// (visibility, filters, order, total), update (field masks, relationship replacement), delete (bindings go
// with it), lookup by issuer and subject (any caller; the uid a person of that pair has or would get when
// nothing the caller may see matches, never revealing what the caller may not see), the caller's own
// metadata, and the confinement of an identity created under a sub-group.
import { generateKeyPairSync } from "node:crypto";
import { Code } from "@connectrpc/connect";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { eq, like } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { IdentitiesService, RelationshipType, ServicePrincipal, type IdentitySchema } from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import { BadRequestSchema, ResourceInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { identities, roleBindings } from "../../src/db/schema/index.js";
import { bootstrap } from "../../src/iam/bootstrap.js";
import { managedRole } from "../../src/iam/managed-roles.js";
import { newChildUid, newRootUid } from "../../src/kernel/uidp.js";
import { openTestDatabase } from "../support/database.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";
import { call, contractCase, protocols, runContractCases, type Protocol } from "./harness.js";
import { listVisibilityCases } from "./list-visibility.js";

const IDENTITY = "chainguard.platform.iam.v2.Identity";
const GROUP = "chainguard.platform.iam.v2.Group";
const NAME_ERROR = "must match the pattern ^[a-z0-9 ._-]{1,}$";
const ISSUER = "https://issuer.test";
const HEX16 = /^[0-9a-f]{16}$/;
const anyMissing = expect.stringMatching(/\/ffffffffffffffff$/);

const publicJwk = generateKeyPairSync("ec", { namedCurve: "P-256" }).publicKey.export({ format: "jwk" });
const privateJwk = generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({ format: "jwk" });
const JWKS = JSON.stringify({ keys: [{ ...publicJwk, kid: "k1", use: "sig", alg: "ES256" }] });

type IdentityInit = MessageInitShape<typeof IdentitySchema>;
const claimMatch = (subject: string, issuer = ISSUER): IdentityInit["relationship"] => ({
  case: "claimMatch",
  value: { iss: { case: "issuer", value: issuer }, sub: { case: "subject", value: subject } },
});
const staticKeys = (subject: string, issuerKeys = JWKS): IdentityInit["relationship"] => ({
  case: "staticKeys",
  value: { issuer: "https://static.test", subject, issuerKeys },
});

let server: TestServer;
/** Identities are created, changed and deleted in this one. */
let world: World;
/** Nothing is ever created in this one: lists and lookups are exact. */
let quiet: World;
const q = { robotA: "", robotB: "", robotC: "" };
/**
 * The identities beneath each of quiet's groups, read straight from the table after seeding (the shared
 * world may grow callers): what a caller with that scope must see, no more, no less.
 */
const under: Record<"org" | "team" | "other", { uid: string; name: string }[]> = { org: [], team: [], other: [] };
const fx = { target: "", nobody: "", robotAasPerson: "" };
const ROOT_UID = /^[0-9a-f]{40}$/;

async function insertIdentity(parent: string | null, name: string, relationship: "claim" | "static" | "aws" = "claim", subject?: string): Promise<string> {
  const uid = parent ? newChildUid(parent) : newRootUid();
  const sub = subject ?? `subject-${uid}`;
  const rel = {
    claim: { relationship: { claimMatch: { issuer: ISSUER, subject: sub } }, relationshipType: RelationshipType.CLAIM_MATCH, issuer: ISSUER, subject: sub },
    static: {
      relationship: { staticKeys: { issuer: "https://static.test", subject: sub, issuerKeys: JWKS } },
      relationshipType: RelationshipType.STATIC,
      issuer: "https://static.test",
      subject: sub,
    },
    aws: { relationship: { awsIdentity: { awsAccount: "123456789012" } }, relationshipType: RelationshipType.AWS_IDENTITY, issuer: null, subject: null },
  }[relationship];
  await server.database.db.insert(identities).values({ uid, parentUid: parent, name, ...rel });
  return uid;
}

const bearer = async (uid: string) => ({ authorization: `Bearer ${await server.token(uid)}` });

beforeAll(async () => {
  server = await startTestServer();
  world = await seedWorld(server, "acme");
  quiet = await seedWorld(server, "quiet");
  q.robotA = await insertIdentity(quiet.org, "robot-a", "claim", "robot-a");
  q.robotB = await insertIdentity(quiet.team, "robot-b", "static", "robot-b");
  q.robotC = await insertIdentity(quiet.other, "robot-c", "aws");
  fx.target = await insertIdentity(world.org, "target", "claim", "target");
  // What an identity created for these pairs gets: bootstrap it in a database of its own and read the uid.
  const scratch = await openTestDatabase();
  try {
    fx.nobody = (await bootstrap(scratch.db, { issuer: ISSUER, subject: "nobody", organization: "scratch" })).identity;
    fx.robotAasPerson = (await bootstrap(scratch.db, { issuer: ISSUER, subject: "robot-a", organization: "scratch" })).identity;
  } finally {
    await scratch.dispose();
  }
  for (const key of ["org", "team", "other"] as const) {
    under[key] = await server.database.db
      .select({ uid: identities.uid, name: identities.name })
      .from(identities)
      .where(like(identities.uid, `${quiet[key]}/%`))
      .orderBy(identities.uid);
  }
  expect(under.org.map((i) => i.uid)).toEqual(expect.arrayContaining([quiet.identity.confined, q.robotA, q.robotB, q.robotC]));
});

afterAll(async () => {
  await server?.close();
});

const base = () => server.baseUrl;
const create = (parent: () => string, identity: IdentityInit) => () => ({ parent: parent(), identity });
const badRequest = (...fields: string[]) => [{ schema: BadRequestSchema, value: { fieldViolations: fields.map((field) => ({ field })) } }];
const invalid = (field: string, message?: string | RegExp) => ({
  code: Code.InvalidArgument,
  reason: "INVALID_ARGUMENT",
  message: message ?? new RegExp(`^Invalid argument: ${field.replace(/[.[\]"]/g, "\\$&")}: `),
  details: badRequest(field),
});

// ---------------------------------------------------------------------------------------------------------
runContractCases("CreateIdentity", base, [
  contractCase({
    name: "owner creates a claim-match identity under the organization; output-only fields are ignored",
    method: IdentitiesService.method.createIdentity,
    request: create(() => world.org, {
      uid: "ignored",
      name: "ci robot",
      description: "deploys",
      email: "ignored@example.com",
      lastSeenTime: { seconds: 1n },
      relationship: claimMatch("repo:acme/app"),
    }),
    headers: () => world.auth("owner"),
    response: (i) => {
      expect(i.uid.startsWith(world.org + "/")).toBe(true);
      expect(i.uid.slice(world.org.length + 1)).toMatch(HEX16);
      expect(i).toMatchObject({ name: "ci robot", description: "deploys", email: "" });
      expect(i.lastSeenTime).toBeUndefined();
      expect(Math.abs(timestampDate(i.createTime!).getTime() - Date.now())).toBeLessThan(60_000);
      expect(i.relationship.case).toBe("claimMatch");
      expect(i.relationship.value).toMatchObject({ iss: { case: "issuer", value: ISSUER }, sub: { case: "subject", value: "repo:acme/app" } });
    },
  }),
  contractCase({
    name: "claim match by patterns (RE2) and claim patterns",
    method: IdentitiesService.method.createIdentity,
    request: create(() => world.org, {
      name: "gha",
      relationship: {
        case: "claimMatch",
        value: {
          iss: { case: "issuerPattern", value: "https://token\\.actions\\.githubusercontent\\.com" },
          sub: { case: "subjectPattern", value: "repo:acme/[^:]+:ref:refs/heads/main" },
          aud: { case: "audience", value: "platform" },
          claims: { repository_owner: "acme" },
          claimPatterns: { job_workflow_ref: "acme/.*@refs/heads/main" },
        },
      },
    }),
    headers: () => world.auth("owner"),
    response: (i) => expect(i.relationship.case).toBe("claimMatch"),
  }),
  contractCase({
    name: "a plain-http issuer on a loopback host is accepted",
    method: IdentitiesService.method.createIdentity,
    request: create(() => world.org, { name: "local", relationship: claimMatch("dev", "http://127.0.0.1:5556/dex") }),
    headers: () => world.auth("owner"),
    response: (i) => expect(i.relationship.case).toBe("claimMatch"),
  }),
  contractCase({
    name: "static keys with a JSON Web Key Set of public keys",
    method: IdentitiesService.method.createIdentity,
    request: create(() => world.org, { name: "static", relationship: staticKeys("svc") }),
    headers: () => world.auth("owner"),
    response: (i) => {
      expect(i.relationship.case).toBe("staticKeys");
      expect(i.relationship.value).toMatchObject({ issuer: "https://static.test", subject: "svc", issuerKeys: JWKS });
    },
  }),
  contractCase({
    name: "an AWS identity",
    method: IdentitiesService.method.createIdentity,
    request: create(() => world.org, {
      name: "aws",
      relationship: { case: "awsIdentity", value: { awsAccount: "123456789012", awsArn: { case: "arnPattern", value: "arn:aws:iam::123456789012:role/.*" } } },
    }),
    headers: () => world.auth("owner"),
    response: (i) => expect(i.relationship).toMatchObject({ case: "awsIdentity", value: { awsAccount: "123456789012" } }),
  }),
  contractCase({
    name: "a service principal",
    method: IdentitiesService.method.createIdentity,
    request: create(() => world.org, { name: "cosigned", relationship: { case: "servicePrincipal", value: ServicePrincipal.COSIGNED } }),
    headers: () => world.auth("owner"),
    response: (i) => expect(i.relationship).toEqual({ case: "servicePrincipal", value: ServicePrincipal.COSIGNED }),
  }),
  contractCase({
    name: "an identity confined to team (owner on org) creates under team",
    method: IdentitiesService.method.createIdentity,
    request: create(() => world.team, { name: "team robot", relationship: claimMatch("team-robot") }),
    headers: () => world.auth("confined"),
    response: (i) => expect(i.uid.startsWith(world.team + "/")).toBe(true),
  }),
  // --- the name
  contractCase({
    name: "a name outside the pattern: INVALID_ARGUMENT on identity.name, in the specification's form",
    method: IdentitiesService.method.createIdentity,
    request: create(() => world.org, { name: "Robot!", relationship: claimMatch("x") }),
    headers: () => world.auth("owner"),
    error: {
      code: Code.InvalidArgument,
      reason: "INVALID_ARGUMENT",
      domain: "iam.platform.test",
      message: `Invalid argument: identity.name: ${NAME_ERROR}`,
      details: [{ schema: BadRequestSchema, value: { fieldViolations: [{ field: "identity.name", description: NAME_ERROR }] } }],
    },
  }),
  contractCase({
    name: "upper case is outside the pattern too",
    method: IdentitiesService.method.createIdentity,
    request: create(() => world.org, { name: "Robot", relationship: claimMatch("x") }),
    headers: () => world.auth("owner"),
    error: invalid("identity.name", `Invalid argument: identity.name: ${NAME_ERROR}`),
  }),
  contractCase({
    name: "an empty body: INVALID_ARGUMENT naming identity.name (and the missing relationship)",
    method: IdentitiesService.method.createIdentity,
    request: () => ({ parent: world.org }),
    headers: () => world.auth("owner"),
    error: { code: Code.InvalidArgument, message: /^Invalid argument: identity\.name: is required/, details: badRequest("identity.name", "identity.relationship") },
  }),
  // --- the relationship
  contractCase({
    name: "no relationship: INVALID_ARGUMENT on identity.relationship",
    method: IdentitiesService.method.createIdentity,
    request: create(() => world.org, { name: "nobody" }),
    headers: () => world.auth("owner"),
    error: invalid("identity.relationship"),
  }),
  contractCase({
    name: "an http issuer on a public host",
    method: IdentitiesService.method.createIdentity,
    request: create(() => world.org, { name: "x", relationship: claimMatch("x", "http://issuer.example.com") }),
    headers: () => world.auth("owner"),
    error: invalid("identity.claim_match.issuer"),
  }),
  contractCase({
    name: "an issuer that is not a URL",
    method: IdentitiesService.method.createIdentity,
    request: create(() => world.org, { name: "x", relationship: claimMatch("x", "issuer.example.com") }),
    headers: () => world.auth("owner"),
    error: invalid("identity.claim_match.issuer"),
  }),
  contractCase({
    name: "no subject nor subject pattern",
    method: IdentitiesService.method.createIdentity,
    request: create(() => world.org, { name: "x", relationship: { case: "claimMatch", value: { iss: { case: "issuer", value: ISSUER } } } }),
    headers: () => world.auth("owner"),
    error: invalid("identity.claim_match.subject"),
  }),
  contractCase({
    name: "an issuer pattern that is not RE2",
    method: IdentitiesService.method.createIdentity,
    request: create(() => world.org, {
      name: "x",
      relationship: { case: "claimMatch", value: { iss: { case: "issuerPattern", value: "https://(a" }, sub: { case: "subject", value: "x" } } },
    }),
    headers: () => world.auth("owner"),
    error: invalid("identity.claim_match.issuer_pattern"),
  }),
  contractCase({
    name: "a subject pattern RE2 does not accept (backreference)",
    method: IdentitiesService.method.createIdentity,
    request: create(() => world.org, {
      name: "x",
      relationship: { case: "claimMatch", value: { iss: { case: "issuer", value: ISSUER }, sub: { case: "subjectPattern", value: "(a)\\1" } } },
    }),
    headers: () => world.auth("owner"),
    error: invalid("identity.claim_match.subject_pattern"),
  }),
  contractCase({
    name: "a claim pattern that does not compile",
    method: IdentitiesService.method.createIdentity,
    request: create(() => world.org, {
      name: "x",
      relationship: {
        case: "claimMatch",
        value: { iss: { case: "issuer", value: ISSUER }, sub: { case: "subject", value: "x" }, claimPatterns: { ref: "refs/(heads" } },
      },
    }),
    headers: () => world.auth("owner"),
    error: invalid('identity.claim_match.claim_patterns["ref"]'),
  }),
  contractCase({
    name: "static keys holding a private key",
    method: IdentitiesService.method.createIdentity,
    request: create(() => world.org, { name: "x", relationship: staticKeys("x", JSON.stringify({ keys: [privateJwk] })) }),
    headers: () => world.auth("owner"),
    error: invalid("identity.static_keys.issuer_keys", /private/),
  }),
  contractCase({
    name: "static keys with an empty key set",
    method: IdentitiesService.method.createIdentity,
    request: create(() => world.org, { name: "x", relationship: staticKeys("x", '{"keys":[]}') }),
    headers: () => world.auth("owner"),
    error: invalid("identity.static_keys.issuer_keys"),
  }),
  contractCase({
    name: "static keys that are not JSON",
    method: IdentitiesService.method.createIdentity,
    request: create(() => world.org, { name: "x", relationship: staticKeys("x", "-----BEGIN PUBLIC KEY-----") }),
    headers: () => world.auth("owner"),
    error: invalid("identity.static_keys.issuer_keys"),
  }),
  contractCase({
    name: "an AWS account that is not 12 digits",
    method: IdentitiesService.method.createIdentity,
    request: create(() => world.org, { name: "x", relationship: { case: "awsIdentity", value: { awsAccount: "1234" } } }),
    headers: () => world.auth("owner"),
    error: invalid("identity.aws_identity.aws_account"),
  }),
  contractCase({
    name: "an unspecified service principal",
    method: IdentitiesService.method.createIdentity,
    request: create(() => world.org, { name: "x", relationship: { case: "servicePrincipal", value: ServicePrincipal.UNSPECIFIED } }),
    headers: () => world.auth("owner"),
    error: invalid("identity.service_principal"),
  }),
  // --- where
  contractCase({
    name: "a missing group: NOT_FOUND with ResourceInfo naming the group",
    method: IdentitiesService.method.createIdentity,
    request: create(() => `${world.org}/ffffffffffffffff`, { name: "x", relationship: claimMatch("x") }),
    headers: () => world.auth("owner"),
    error: { code: Code.NotFound, reason: "NOT_FOUND", details: [{ schema: ResourceInfoSchema, value: { resourceType: GROUP, resourceName: anyMissing } }] },
  }),
  contractCase({
    name: "a viewer: PERMISSION_DENIED",
    method: IdentitiesService.method.createIdentity,
    request: create(() => world.org, { name: "x", relationship: claimMatch("x") }),
    headers: () => world.auth("viewer"),
    error: { code: Code.PermissionDenied, reason: "PERMISSION_DENIED" },
  }),
  contractCase({
    name: "a viewer under a missing group: PERMISSION_DENIED, not NOT_FOUND",
    method: IdentitiesService.method.createIdentity,
    request: create(() => `${world.org}/ffffffffffffffff`, { name: "x", relationship: claimMatch("x") }),
    headers: () => world.auth("viewer"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "an identity confined to team cannot create under the organization",
    method: IdentitiesService.method.createIdentity,
    request: create(() => world.org, { name: "x", relationship: claimMatch("x") }),
    headers: () => world.auth("confined"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "stranger: PERMISSION_DENIED, before any validation",
    method: IdentitiesService.method.createIdentity,
    request: create(() => world.team, { name: "Not Valid!" }),
    headers: () => world.auth("stranger"),
    error: { code: Code.PermissionDenied },
  }),
]);

// ---------------------------------------------------------------------------------------------------------
runContractCases("GetIdentity", base, [
  contractCase({
    name: "owner reads an identity of a sub-group",
    method: IdentitiesService.method.getIdentity,
    request: () => ({ uid: world.identity.confined }),
    headers: () => world.auth("owner"),
    response: (i) => {
      expect(i).toMatchObject({ uid: world.identity.confined, name: "confined" });
      expect(i.relationship.case).toBe("claimMatch");
      expect(i.createTime).toBeDefined();
      expect(i.updateTime).toBeDefined();
    },
  }),
  contractCase({
    name: "a viewer bound on team reads it",
    method: IdentitiesService.method.getIdentity,
    request: () => ({ uid: world.identity.confined }),
    headers: () => world.auth("teamViewer"),
    response: (i) => expect(i.uid).toBe(world.identity.confined),
  }),
  contractCase({
    name: "a missing identity: NOT_FOUND with ResourceInfo",
    method: IdentitiesService.method.getIdentity,
    request: () => ({ uid: `${world.org}/ffffffffffffffff` }),
    headers: () => world.auth("viewer"),
    error: { code: Code.NotFound, reason: "NOT_FOUND", details: [{ schema: ResourceInfoSchema, value: { resourceType: IDENTITY, resourceName: anyMissing } }] },
  }),
  contractCase({
    name: "a viewer of a sibling group: PERMISSION_DENIED on an existing identity",
    method: IdentitiesService.method.getIdentity,
    request: () => ({ uid: world.identity.confined }),
    headers: () => world.auth("otherViewer"),
    error: { code: Code.PermissionDenied, reason: "PERMISSION_DENIED" },
  }),
  contractCase({
    name: "a viewer of a sibling group: PERMISSION_DENIED on a missing identity too",
    method: IdentitiesService.method.getIdentity,
    request: () => ({ uid: `${world.team}/ffffffffffffffff` }),
    headers: () => world.auth("otherViewer"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "stranger: PERMISSION_DENIED",
    method: IdentitiesService.method.getIdentity,
    request: () => ({ uid: fx.target }),
    headers: () => world.auth("stranger"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "a root-level identity lies in no group: PERMISSION_DENIED even for the organization's owner",
    method: IdentitiesService.method.getIdentity,
    request: () => ({ uid: world.identity.viewer }),
    headers: () => world.auth("owner"),
    error: { code: Code.PermissionDenied },
  }),
]);

// ---------------------------------------------------------------------------------------------------------
const uidsOf = (r: { identities: { uid: string }[] }) => r.identities.map((i) => i.uid).sort();

runContractCases("ListIdentities", base, [
  contractCase({
    name: "a viewer on the organization sees every identity in its tree, and total_count says so",
    method: IdentitiesService.method.listIdentities,
    request: {},
    headers: () => quiet.auth("viewer"),
    response: (r) => {
      expect(uidsOf(r)).toEqual(under.org.map((i) => i.uid));
      expect(r.totalCount).toBe(BigInt(under.org.length));
    },
  }),
  ...listVisibilityCases({
    method: IdentitiesService.method.listIdentities,
    noun: "identities",
    world: () => quiet,
    items: (r) => r.identities,
    teamViewer: () => under.team.map((i) => i.uid),
    outside: { request: () => ({ uidp: { descendantsOf: quiet.org } }), uids: () => under.other.map((i) => i.uid) },
  }),
  contractCase({
    name: "relationship_type filter",
    method: IdentitiesService.method.listIdentities,
    request: { relationshipType: RelationshipType.STATIC },
    headers: () => quiet.auth("viewer"),
    response: (r) => {
      expect(uidsOf(r)).toEqual([q.robotB]);
      expect(r.identities[0]!.relationship.case).toBe("staticKeys");
      expect(r.totalCount).toBe(1n);
    },
  }),
  contractCase({
    name: "exact name filter",
    method: IdentitiesService.method.listIdentities,
    request: { name: "robot-a" },
    headers: () => quiet.auth("viewer"),
    response: (r) => expect(uidsOf(r)).toEqual([q.robotA]),
  }),
  contractCase({
    name: "uidp.children_of team",
    method: IdentitiesService.method.listIdentities,
    request: () => ({ uidp: { childrenOf: quiet.team } }),
    headers: () => quiet.auth("owner"),
    response: (r) => {
      expect(uidsOf(r)).toEqual(under.team.map((i) => i.uid));
      expect(r.totalCount).toBe(BigInt(under.team.length));
    },
  }),
  contractCase({
    name: "order_by name desc, paged by two with a carried total",
    method: IdentitiesService.method.listIdentities,
    request: { orderBy: "name desc", pageSize: 2 },
    headers: () => quiet.auth("viewer"),
    response: (r) => {
      expect(r.identities.map((i) => i.name)).toEqual(["robot-c", "robot-b"]);
      expect(r.totalCount).toBe(BigInt(under.org.length));
      expect(r.nextPageToken).not.toBe("");
    },
  }),
  contractCase({
    name: "an unknown relationship_type: INVALID_ARGUMENT",
    method: IdentitiesService.method.listIdentities,
    request: { relationshipType: 42 as RelationshipType },
    headers: () => quiet.auth("viewer"),
    error: invalid("relationship_type"),
    // proto3 JSON cannot name an enum value the schema lacks.
    only: ["grpc", "grpc-web", "connect-binary-h2"],
  }),
]);

describe.each(protocols)("ListIdentities paging [%s]", (protocol: Protocol) => {
  it("walks every page in name order", async () => {
    const seen: string[] = [];
    let pageToken = "";
    for (let i = 0; i < 6; i++) {
      const out = await call(protocol, base(), IdentitiesService.method.listIdentities, { orderBy: "name", pageSize: 3, pageToken }, quiet.auth("viewer"));
      expect(out.error).toBeUndefined();
      expect(out.message!.totalCount).toBe(BigInt(under.org.length));
      seen.push(...out.message!.identities.map((x) => x.name));
      pageToken = out.message!.nextPageToken;
      if (!pageToken) break;
    }
    expect(seen).toEqual(under.org.map((i) => i.name).sort());
    expect(seen).toEqual(expect.arrayContaining(["confined", "robot-a", "robot-b", "robot-c"]));
  });
});

// ---------------------------------------------------------------------------------------------------------
describe.each(protocols)("UpdateIdentity [%s]", (protocol: Protocol) => {
  const get = async () => (await call(protocol, base(), IdentitiesService.method.getIdentity, { uid: fx.target }, world.auth("owner"))).message!;
  const update = (identity: IdentityInit, paths?: string[], caller: "owner" | "viewer" = "owner") =>
    call(protocol, base(), IdentitiesService.method.updateIdentity, { identity, ...(paths ? { updateMask: { paths } } : {}) }, world.auth(caller));
  const columns = async () => {
    const [row] = await server.database.db.select().from(identities).where(eq(identities.uid, fx.target));
    return row!;
  };

  it("a mask naming description changes only the description; output-only fields are ignored; update_time moves", async () => {
    const before = await get();
    const out = await update({ uid: fx.target, name: "renamed", description: `desc ${protocol}`, email: "x@example.com", company: "x" }, ["description", "email"]);
    expect(out.error, out.error?.message).toBeUndefined();
    expect(out.message).toMatchObject({ uid: fx.target, name: before.name, description: `desc ${protocol}`, email: "", company: before.company });
    expect(out.message!.relationship).toEqual(before.relationship);
    expect(out.message!.createTime).toEqual(before.createTime);
    expect(timestampDate(out.message!.updateTime!).getTime()).toBeGreaterThanOrEqual(timestampDate(before.updateTime!).getTime());
    expect(out.message!.updateTime).not.toEqual(before.updateTime);
  });

  it("without a mask, only the fields present change", async () => {
    const before = await get();
    const out = await update({ uid: fx.target, company: `co ${protocol}` });
    expect(out.error, out.error?.message).toBeUndefined();
    expect(out.message).toMatchObject({ name: before.name, description: before.description, company: `co ${protocol}` });
    expect(out.message!.relationship).toEqual(before.relationship);
  });

  it("a new name is validated against the pattern; nothing changes on error", async () => {
    const before = await get();
    const out = await update({ uid: fx.target, name: "Bad Name" }, ["name"]);
    expect(out.error?.code).toBe(Code.InvalidArgument);
    expect(out.error?.message).toBe(`Invalid argument: identity.name: ${NAME_ERROR}`);
    expect(await get()).toEqual(before);
    const ok = await update({ uid: fx.target, name: `target ${protocol.replace(/[^a-z]/g, "")}` }, ["name"]);
    expect(ok.message?.name).toMatch(/^target /);
  });

  it("naming the relationship's field replaces it, and the lookup columns follow", async () => {
    const out = await update({ uid: fx.target, relationship: staticKeys(`static-${protocol}`) }, ["static_keys"]);
    expect(out.error, out.error?.message).toBeUndefined();
    expect(out.message!.relationship.case).toBe("staticKeys");
    expect(await columns()).toMatchObject({ relationshipType: RelationshipType.STATIC, issuer: "https://static.test", subject: `static-${protocol}` });

    const back = await update({ uid: fx.target, relationship: claimMatch("target") }, ["claim_match"]);
    expect(back.message!.relationship).toMatchObject({ case: "claimMatch", value: { sub: { case: "subject", value: "target" } } });
    expect(await columns()).toMatchObject({ relationshipType: RelationshipType.CLAIM_MATCH, issuer: ISSUER, subject: "target" });
  });

  it("a mask path into the relationship changes that field and is validated", async () => {
    const bad = await update({ uid: fx.target, relationship: claimMatch("target", "ftp://issuer.test") }, ["claim_match.issuer"]);
    expect(bad.error?.code).toBe(Code.InvalidArgument);
    expect(bad.error?.message).toMatch(/^Invalid argument: identity\.claim_match\.issuer: /);
    const good = await update({ uid: fx.target, relationship: claimMatch("target", "https://other.test") }, ["claim_match.issuer"]);
    expect(good.message!.relationship).toMatchObject({ case: "claimMatch", value: { iss: { value: "https://other.test" }, sub: { value: "target" } } });
    await update({ uid: fx.target, relationship: claimMatch("target") }, ["claim_match"]);
  });

  it("clearing the relationship (its field named, absent from the body) is refused", async () => {
    const before = await get();
    const out = await update({ uid: fx.target }, ["claim_match"]);
    expect(out.error?.code).toBe(Code.InvalidArgument);
    expect(out.error?.message).toMatch(/^Invalid argument: identity\.relationship: /);
    expect(await get()).toEqual(before);
  });

  it("a missing identity: NOT_FOUND; a viewer: PERMISSION_DENIED whether or not it exists", async () => {
    const missing = `${world.org}/ffffffffffffffff`;
    expect((await update({ uid: missing, description: "x" })).error?.code).toBe(Code.NotFound);
    for (const uid of [fx.target, missing]) expect((await update({ uid, description: "x" }, undefined, "viewer")).error?.code).toBe(Code.PermissionDenied);
  });
});

// ---------------------------------------------------------------------------------------------------------
describe.each(protocols)("DeleteIdentity [%s]", (protocol: Protocol) => {
  const del = (uid: string, caller: "owner" | "viewer" = "owner") => call(protocol, base(), IdentitiesService.method.deleteIdentity, { uid }, world.auth(caller));

  it("deletes an identity and its role bindings", async () => {
    const uid = await insertIdentity(world.team, `doomed ${protocol}`);
    const binding = newChildUid(world.team);
    await server.database.db.insert(roleBindings).values({ uid: binding, groupUid: world.team, identityUid: uid, roleUid: managedRole("viewer").uid });
    const out = await del(uid);
    expect(out.error, out.error?.message).toBeUndefined();
    const got = await call(protocol, base(), IdentitiesService.method.getIdentity, { uid }, world.auth("owner"));
    expect(got.error?.code).toBe(Code.NotFound);
    expect(await server.database.db.select().from(roleBindings).where(eq(roleBindings.uid, binding))).toEqual([]);
  });

  it("a missing identity: NOT_FOUND with ResourceInfo", async () => {
    const out = await del(`${world.org}/ffffffffffffffff`);
    expect(out.error?.code).toBe(Code.NotFound);
    expect(out.error!.details.find((d) => d.$typeName === ResourceInfoSchema.typeName)).toMatchObject({ resourceType: IDENTITY });
  });

  it("a viewer: PERMISSION_DENIED whether or not it exists; nothing is deleted", async () => {
    expect((await del(fx.target, "viewer")).error?.code).toBe(Code.PermissionDenied);
    expect((await del(`${world.org}/ffffffffffffffff`, "viewer")).error?.code).toBe(Code.PermissionDenied);
    expect((await call(protocol, base(), IdentitiesService.method.getIdentity, { uid: fx.target }, world.auth("owner"))).message?.uid).toBe(fx.target);
  });
});

// ---------------------------------------------------------------------------------------------------------
runContractCases("LookupIdentity", base, [
  contractCase({
    name: "the owner finds an identity of its organization by issuer and subject",
    method: IdentitiesService.method.lookupIdentity,
    request: { issuer: ISSUER, subject: "robot-a" },
    headers: () => quiet.auth("owner"),
    response: (r) => expect(r.uid).toBe(q.robotA),
  }),
  contractCase({
    name: "a viewer bound on team finds team's identity",
    method: IdentitiesService.method.lookupIdentity,
    request: () => ({ issuer: ISSUER, subject: `confined-${quiet.identity.confined}` }),
    headers: () => quiet.auth("teamViewer"),
    response: (r) => expect(r.uid).toBe(quiet.identity.confined),
  }),
  contractCase({
    name: "…but not one outside its scope: the uid a person of that issuer and subject would have, as if it did not exist",
    method: IdentitiesService.method.lookupIdentity,
    request: { issuer: ISSUER, subject: "robot-a" },
    headers: () => quiet.auth("teamViewer"),
    response: (r) => {
      expect(r.uid).toMatch(ROOT_UID);
      expect(r.uid).not.toBe(q.robotA);
      expect(r.uid).toBe(fx.robotAasPerson);
    },
  }),
  contractCase({
    name: "no such identity: the deterministic uid, the same for every caller and every call",
    method: IdentitiesService.method.lookupIdentity,
    request: { issuer: ISSUER, subject: "nobody" },
    headers: () => quiet.auth("owner"),
    response: (r) => expect(r.uid).toBe(fx.nobody),
  }),
  contractCase({
    name: "…also to a caller with no binding anywhere (any authenticated caller may look up)",
    method: IdentitiesService.method.lookupIdentity,
    request: { issuer: ISSUER, subject: "nobody" },
    headers: () => quiet.auth("stranger"),
    response: (r) => expect(r.uid).toBe(fx.nobody),
  }),
  contractCase({
    name: "…and to an identity confined to a subgroup",
    method: IdentitiesService.method.lookupIdentity,
    request: { issuer: ISSUER, subject: "nobody" },
    headers: () => quiet.auth("confined"),
    response: (r) => expect(r.uid).toBe(fx.nobody),
  }),
  contractCase({
    name: "the uid depends on both the issuer and the subject",
    method: IdentitiesService.method.lookupIdentity,
    request: { issuer: "https://other-issuer.test", subject: "nobody" },
    headers: () => quiet.auth("owner"),
    response: (r) => {
      expect(r.uid).toMatch(ROOT_UID);
      expect(r.uid).not.toBe(fx.nobody);
    },
  }),
  contractCase({
    name: "a caller finds itself, even with no bindings",
    method: IdentitiesService.method.lookupIdentity,
    request: () => ({ issuer: ISSUER, subject: `stranger-${quiet.identity.stranger}` }),
    headers: () => quiet.auth("stranger"),
    response: (r) => expect(r.uid).toBe(quiet.identity.stranger),
  }),
  contractCase({
    name: "another person (a root-level identity): the uid that issuer and subject resolve to",
    method: IdentitiesService.method.lookupIdentity,
    request: () => ({ issuer: ISSUER, subject: `owner-${quiet.identity.owner}` }),
    headers: () => quiet.auth("stranger"),
    response: (r) => expect(r.uid).toBe(quiet.identity.owner),
  }),
  contractCase({
    name: "only claim-match identities are looked up (static keys are not): the deterministic uid",
    method: IdentitiesService.method.lookupIdentity,
    request: { issuer: "https://static.test", subject: "robot-b" },
    headers: () => quiet.auth("owner"),
    response: (r) => {
      expect(r.uid).toMatch(ROOT_UID);
      expect(r.uid).not.toBe(q.robotB);
    },
  }),
  contractCase({
    name: "no token: UNAUTHENTICATED",
    method: IdentitiesService.method.lookupIdentity,
    request: { issuer: ISSUER, subject: "nobody" },
    error: { code: Code.Unauthenticated },
  }),
  contractCase({
    name: "issuer and subject are required",
    method: IdentitiesService.method.lookupIdentity,
    request: {},
    headers: () => quiet.auth("owner"),
    error: { code: Code.InvalidArgument, message: "Invalid argument: issuer: is required; subject: is required", details: badRequest("issuer", "subject") },
  }),
]);

describe.each(protocols)("LookupIdentity before and after the person's identity exists [%s]", (protocol: Protocol) => {
  it("the uid answered before is the uid the identity gets, and the answer after", async () => {
    const subject = `later-${protocol}`;
    const lookup = async (caller: "stranger" | "owner") => {
      const out = await call(protocol, base(), IdentitiesService.method.lookupIdentity, { issuer: ISSUER, subject }, world.auth(caller));
      expect(out.error).toBeUndefined();
      return out.message!.uid;
    };
    const before = await lookup("stranger");
    expect(before).toMatch(ROOT_UID);
    const made = await bootstrap(server.database.db, { issuer: ISSUER, subject, organization: `later ${protocol}` });
    expect(made).toMatchObject({ created: true, identity: before });
    expect(await lookup("stranger")).toBe(before);
    expect(await lookup("owner")).toBe(before);
    const self = { authorization: `Bearer ${await server.token(before)}` };
    const own = await call(protocol, base(), IdentitiesService.method.lookupIdentity, { issuer: ISSUER, subject }, self);
    expect(own.message?.uid).toBe(before);
  });
});

// ---------------------------------------------------------------------------------------------------------
describe.each(protocols)("UpdateIdentityMetadata [%s]", (protocol: Protocol) => {
  it("changes the caller's own metadata; uid and name come from the identity; output-only fields are ignored", async () => {
    const me = await insertIdentity(world.team, `me ${protocol.replace(/[^a-z]/g, "")}`);
    const auth = await bearer(me);
    const out = await call(
      protocol,
      base(),
      IdentitiesService.method.updateIdentityMetadata,
      {
        identityMetadata: { uid: "someone-else", name: "hacker", givenName: "Eve", company: "Acme", jobTitle: "SRE", updatesOptIn: true },
        updateMask: { paths: ["company", "job_title", "updates_opt_in", "name", "given_name"] },
      },
      auth,
    );
    expect(out.error, out.error?.message).toBeUndefined();
    expect(out.message).toMatchObject({ uid: me, name: `me ${protocol.replace(/[^a-z]/g, "")}`, givenName: "", company: "Acme", jobTitle: "SRE", updatesOptIn: true });

    // No mask: the fields present; the others keep their values.
    const again = await call(protocol, base(), IdentitiesService.method.updateIdentityMetadata, { identityMetadata: { utmSource: "newsletter" } }, auth);
    expect(again.message).toMatchObject({ company: "Acme", jobTitle: "SRE", updatesOptIn: true, utmSource: "newsletter" });

    // The company is the identity's own field.
    const identity = await call(protocol, base(), IdentitiesService.method.getIdentity, { uid: me }, world.auth("owner"));
    expect(identity.message?.company).toBe("Acme");

    const tooLong = await call(protocol, base(), IdentitiesService.method.updateIdentityMetadata, { identityMetadata: { company: "c".repeat(300) } }, auth);
    expect(tooLong.error?.code).toBe(Code.InvalidArgument);
    expect(tooLong.error?.message).toMatch(/^Invalid argument: identity_metadata\.company: /);
    const badMask = await call(protocol, base(), IdentitiesService.method.updateIdentityMetadata, { identityMetadata: {}, updateMask: { paths: ["shoe_size"] } }, auth);
    expect(badMask.error?.message).toMatch(/^Invalid argument: update_mask: /);
  });
});

// ---------------------------------------------------------------------------------------------------------
describe.each(protocols)("Confinement and last seen [%s]", (protocol: Protocol) => {
  it("an identity created under team and bound owner on the organization reaches team only", async () => {
    const created = await call(
      protocol,
      base(),
      IdentitiesService.method.createIdentity,
      { parent: world.team, identity: { name: "team bot", relationship: claimMatch(`team-bot-${protocol}`) } },
      world.auth("owner"),
    );
    expect(created.error, created.error?.message).toBeUndefined();
    const uid = created.message!.uid;
    await server.database.db.insert(roleBindings).values({ uid: newChildUid(world.org), groupUid: world.org, identityUid: uid, roleUid: managedRole("owner").uid });
    const auth = await bearer(uid);

    const org = await call(protocol, base(), GroupsService.method.getGroup, { uid: world.org }, auth);
    expect(org.error?.code).toBe(Code.PermissionDenied);
    const team = await call(protocol, base(), GroupsService.method.getGroup, { uid: world.team }, auth);
    expect(team.error, team.error?.message).toBeUndefined();
    expect(team.message?.uid).toBe(world.team);
    const list = await call(protocol, base(), GroupsService.method.listGroups, {}, auth);
    expect(list.message!.groups.every((g) => g.uid === world.team || g.uid.startsWith(world.team + "/"))).toBe(true);
    const sibling = await call(protocol, base(), IdentitiesService.method.createIdentity, { parent: world.other, identity: { name: "x", relationship: claimMatch("x") } }, auth);
    expect(sibling.error?.code).toBe(Code.PermissionDenied);
  });

  it("last_seen_time shows when an identity last authenticated", async () => {
    const uid = await insertIdentity(world.team, "seen");
    const before = await call(protocol, base(), IdentitiesService.method.getIdentity, { uid }, world.auth("owner"));
    expect(before.message!.lastSeenTime).toBeUndefined();
    await call(protocol, base(), GroupsService.method.checkEligibility, {}, await bearer(uid));
    await vi.waitFor(
      async () => {
        const after = await call(protocol, base(), IdentitiesService.method.getIdentity, { uid }, world.auth("owner"));
        expect(after.message!.lastSeenTime).toBeDefined();
        expect(Math.abs(timestampDate(after.message!.lastSeenTime!).getTime() - Date.now())).toBeLessThan(60_000);
      },
      { timeout: 5_000, interval: 50 },
    );
  });
});
