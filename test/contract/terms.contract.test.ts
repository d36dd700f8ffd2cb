// TermsService over every protocol: AcceptTerms (who accepted what, for the organization; a sub-group stands
// for its organization and needs the capability there; unknown and missing document ids; authorization
// before existence), ListTermsAcceptances (the group's organization and its ancestors, order, paging,
// totals), and the operator's marking (TERMS_REQUIRED_FOR): a marked method answers FAILED_PRECONDITION with
// the contract's TermsNotAcceptedDetail, decoded on every protocol, until every document is accepted.
import { Code } from "@connectrpc/connect";
import { and, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ReposService } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { TermsNotAcceptedDetailSchema, TermsService } from "../../gen/chainguard/platform/iam/v2/terms_pb.js";
import { BadRequestSchema, PreconditionFailureSchema, ResourceInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { termsAcceptances } from "../../src/db/schema/index.js";
import { newChildUid } from "../../src/kernel/uidp.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";
import { call, contractCase, detail, protocols, runContractCases, type Protocol } from "./harness.js";

const GROUP = "chainguard.platform.iam.v2.Group";
const DOCUMENTS = [
  { id: "tos", label: "Terms of Service", url: "https://legal.example.com/tos" },
  { id: "aup", label: "Acceptable Use Policy", url: "https://legal.example.com/aup" },
];
const GATED = "chainguard.platform.registry.v2.ReposService/CreateRepo";

let server: TestServer;
/** Acceptances are made in this one. */
let world: World;
/** Two acceptances inserted, none ever made: list results and totals are exact. */
let quiet: World;
/** Nothing accepted: the gated method is refused, listing both documents. */
let gated: World;
/** One document accepted: the gated method is refused, listing the other. */
let half: World;
/** Both documents accepted on the organization: the gated method works, in sub-groups too. */
let done: World;

let seq = 0;
const unique = (prefix: string) => `${prefix}-${++seq}`;
const base = () => server.baseUrl;
const field = (name: string) => ({ schema: BadRequestSchema, value: { fieldViolations: [{ field: name }] } });

async function accept(org: string, docId: string, by: string, at = new Date()): Promise<void> {
  await server.database.db.insert(termsAcceptances).values({ uid: newChildUid(org), orgUid: org, docId, acceptedBy: by, createTime: at });
}

beforeAll(async () => {
  server = await startTestServer({ terms: { documents: DOCUMENTS, requiredFor: [GATED] } });
  world = await seedWorld(server, "acme");
  quiet = await seedWorld(server, "quiet");
  gated = await seedWorld(server, "gated");
  half = await seedWorld(server, "half");
  done = await seedWorld(server, "done");
  await accept(quiet.org, "tos", quiet.identity.owner, new Date(Date.UTC(2024, 0, 1)));
  await accept(quiet.org, "aup", quiet.identity.confined, new Date(Date.UTC(2024, 0, 2)));
  await accept(half.org, "aup", half.identity.owner);
  await accept(done.org, "tos", done.identity.owner);
  await accept(done.org, "aup", done.identity.owner);
});

afterAll(async () => {
  await server?.close();
});

// ---------------------------------------------------------------------------------------------------------
runContractCases("AcceptTerms", base, [
  contractCase({
    name: "an owner accepts documents for the organization; who accepted is recorded",
    method: TermsService.method.acceptTerms,
    request: () => ({ group: world.org, documentIds: ["tos"] }),
    headers: () => world.auth("owner"),
    response: (r) => expect(r).toMatchObject({ group: world.org, documentIds: ["tos"] }),
  }),
  contractCase({
    name: "a sub-group stands for its organization; repeated ids count once",
    method: TermsService.method.acceptTerms,
    request: () => ({ group: world.team, documentIds: ["aup", "aup"] }),
    headers: () => world.auth("owner"),
    response: (r) => expect(r).toMatchObject({ group: world.org, documentIds: ["aup"] }),
  }),
  contractCase({
    name: "an unknown document id: INVALID_ARGUMENT naming document_ids[i]",
    method: TermsService.method.acceptTerms,
    request: () => ({ group: world.org, documentIds: ["tos", "nope"] }),
    headers: () => world.auth("owner"),
    error: { code: Code.InvalidArgument, details: [{ schema: BadRequestSchema, value: { fieldViolations: [{ field: "document_ids[1]", description: expect.stringContaining("tos, aup") }] } }] },
  }),
  contractCase({
    name: "no document ids: INVALID_ARGUMENT",
    method: TermsService.method.acceptTerms,
    request: () => ({ group: world.org, documentIds: [] }),
    headers: () => world.auth("owner"),
    error: { code: Code.InvalidArgument, details: [field("document_ids")] },
  }),
  contractCase({
    name: "a viewer may not accept",
    method: TermsService.method.acceptTerms,
    request: () => ({ group: world.org, documentIds: ["tos"] }),
    headers: () => world.auth("viewer"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "an owner confined to the sub-group may not accept for the whole organization",
    method: TermsService.method.acceptTerms,
    request: () => ({ group: world.team, documentIds: ["tos"] }),
    headers: () => world.auth("confined"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "a sub-group that does not exist: NOT_FOUND",
    method: TermsService.method.acceptTerms,
    request: () => ({ group: `${world.org}/ffffffffffffffff`, documentIds: ["tos"] }),
    headers: () => world.auth("owner"),
    error: { code: Code.NotFound, details: [{ schema: ResourceInfoSchema, value: { resourceType: GROUP } }] },
  }),
  contractCase({
    name: "an organization the caller holds nothing on: PERMISSION_DENIED, existing or not",
    method: TermsService.method.acceptTerms,
    request: () => ({ group: "f".repeat(40), documentIds: ["tos"] }),
    headers: () => world.auth("owner"),
    error: { code: Code.PermissionDenied },
  }),
]);

describe("AcceptTerms records", () => {
  it("one row per document, the first acceptance kept", async () => {
    // After the cases above (on every protocol): tos and aup, once each, by the owner.
    const rows = await server.database.db.select().from(termsAcceptances).where(eq(termsAcceptances.orgUid, world.org));
    expect(rows.map((r) => [r.docId, r.acceptedBy]).sort()).toEqual([
      ["aup", world.identity.owner],
      ["tos", world.identity.owner],
    ]);
  });
});

// ---------------------------------------------------------------------------------------------------------
runContractCases("ListTermsAcceptances", base, [
  contractCase({
    name: "the organization's acceptances, oldest first by default, with who and when",
    method: TermsService.method.listTermsAcceptances,
    request: () => ({ group: quiet.org }),
    headers: () => quiet.auth("owner"),
    response: (r) => {
      expect(r.termsAcceptances.map((a) => ({ docId: a.docId, acceptedBy: a.acceptedBy, orgUid: a.orgUid }))).toEqual([
        { docId: "tos", acceptedBy: quiet.identity.owner, orgUid: quiet.org },
        { docId: "aup", acceptedBy: quiet.identity.confined, orgUid: quiet.org },
      ]);
      expect(r.termsAcceptances[0]!.createTime?.seconds).toBe(BigInt(Date.UTC(2024, 0, 1) / 1000));
      expect(r.totalCount).toBe(2n);
      expect(r.nextPageToken).toBe("");
    },
  }),
  contractCase({
    name: "a sub-group lists the acceptances of its organization (an ancestor)",
    method: TermsService.method.listTermsAcceptances,
    request: () => ({ group: quiet.team, orderBy: "doc_id desc" }),
    headers: () => quiet.auth("owner"),
    response: (r) => {
      expect(r.termsAcceptances.map((a) => a.docId)).toEqual(["tos", "aup"]);
      expect(r.termsAcceptances.every((a) => a.orgUid === quiet.org)).toBe(true);
    },
  }),
  contractCase({
    name: "a group whose organization accepted nothing: empty",
    method: TermsService.method.listTermsAcceptances,
    request: () => ({ group: gated.org }),
    headers: () => gated.auth("owner"),
    response: (r) => {
      expect(r.termsAcceptances).toEqual([]);
      expect(r.totalCount).toBe(0n);
    },
  }),
  contractCase({
    name: "an unknown order_by field: INVALID_ARGUMENT",
    method: TermsService.method.listTermsAcceptances,
    request: () => ({ group: quiet.org, orderBy: "label" }),
    headers: () => quiet.auth("owner"),
    error: { code: Code.InvalidArgument, details: [field("order_by")] },
  }),
  contractCase({
    name: "a viewer (no TERMS_LIST) may not list",
    method: TermsService.method.listTermsAcceptances,
    request: () => ({ group: quiet.org }),
    headers: () => quiet.auth("viewer"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "another organization's owner may not list",
    method: TermsService.method.listTermsAcceptances,
    request: () => ({ group: quiet.org }),
    headers: () => world.auth("owner"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "a sub-group that does not exist: NOT_FOUND",
    method: TermsService.method.listTermsAcceptances,
    request: () => ({ group: `${quiet.org}/ffffffffffffffff` }),
    headers: () => quiet.auth("owner"),
    error: { code: Code.NotFound, details: [{ schema: ResourceInfoSchema, value: { resourceType: GROUP } }] },
  }),
]);

describe.each(protocols)("ListTermsAcceptances paging [%s]", (protocol: Protocol) => {
  it("pages of one, the total carried, newest first", async () => {
    const first = await call(protocol, base(), TermsService.method.listTermsAcceptances, { group: quiet.team, pageSize: 1, orderBy: "create_time desc" }, quiet.auth("owner"));
    expect(first.error?.message).toBeUndefined();
    expect(first.message!.termsAcceptances.map((a) => a.docId)).toEqual(["aup"]);
    expect(first.message!.totalCount).toBe(2n);
    expect(first.message!.nextPageToken).not.toBe("");
    const second = await call(
      protocol,
      base(),
      TermsService.method.listTermsAcceptances,
      { group: quiet.team, pageSize: 1, orderBy: "create_time desc", pageToken: first.message!.nextPageToken },
      quiet.auth("owner"),
    );
    expect(second.message!.termsAcceptances.map((a) => a.docId)).toEqual(["tos"]);
    expect(second.message!.nextPageToken).toBe("");
  });
});

// ---------------------------------------------------------------------------------------------------------
describe.each(protocols)("a method marked as needing accepted terms [%s]", (protocol: Protocol) => {
  const createRepo = (w: World, group: string, caller: "editor" | "viewer" = "editor") =>
    call(protocol, base(), ReposService.method.createRepo, { parent: group, repo: { name: unique("gated") } }, w.auth(caller));

  it("nothing accepted: FAILED_PRECONDITION with TermsNotAcceptedDetail listing every document", async () => {
    const out = await createRepo(gated, gated.org);
    expect(out.error?.code, out.error?.message).toBe(Code.FailedPrecondition);
    const terms = detail(out.error!, TermsNotAcceptedDetailSchema);
    expect(terms, "TermsNotAcceptedDetail decodes").toBeDefined();
    expect(terms!.missing.map((m) => ({ id: m.id, label: m.label, url: m.url }))).toEqual(DOCUMENTS);
    expect(detail(out.error!, PreconditionFailureSchema)?.violations.map((v) => [v.type, v.subject])).toEqual([
      ["TERMS_NOT_ACCEPTED", "tos"],
      ["TERMS_NOT_ACCEPTED", "aup"],
    ]);
    if (protocol === "rest") expect(out.error!.httpStatus).toBe(400);
  });

  it("in a sub-group: the organization's terms decide", async () => {
    const out = await createRepo(gated, gated.team);
    expect(out.error?.code).toBe(Code.FailedPrecondition);
    expect(detail(out.error!, TermsNotAcceptedDetailSchema)?.missing.map((m) => m.id)).toEqual(["tos", "aup"]);
  });

  it("one document accepted: only the other is missing", async () => {
    const out = await createRepo(half, half.org);
    expect(out.error?.code).toBe(Code.FailedPrecondition);
    expect(detail(out.error!, TermsNotAcceptedDetailSchema)?.missing.map((m) => m.id)).toEqual(["tos"]);
  });

  it("every document accepted: the call runs, in the organization and beneath it", async () => {
    for (const group of [done.org, done.team]) {
      const out = await createRepo(done, group);
      expect(out.error?.message).toBeUndefined();
      expect(out.message!.uid.startsWith(group + "/")).toBe(true);
    }
  });

  it("a caller who may not call the method is refused for that, and learns nothing of the terms", async () => {
    const out = await createRepo(gated, gated.org, "viewer");
    expect(out.error?.code).toBe(Code.PermissionDenied);
    expect(detail(out.error!, TermsNotAcceptedDetailSchema)).toBeUndefined();
  });

  it("methods not marked are not gated", async () => {
    const out = await call(protocol, base(), ReposService.method.listRepos, { uidp: { descendantsOf: gated.org } }, gated.auth("editor"));
    expect(out.error?.message).toBeUndefined();
  });
});

describe("accepting lifts the gate", () => {
  it("an owner accepts the missing document, and the marked method then runs", async () => {
    const w = await seedWorld(server, "lifted");
    const before = await call("connect-json", base(), ReposService.method.createRepo, { parent: w.org, repo: { name: "first" } }, w.auth("editor"));
    expect(before.error?.code).toBe(Code.FailedPrecondition);
    const accepted = await call("grpc", base(), TermsService.method.acceptTerms, { group: w.org, documentIds: ["tos", "aup"] }, w.auth("owner"));
    expect(accepted.error?.message).toBeUndefined();
    const rows = await server.database.db
      .select()
      .from(termsAcceptances)
      .where(and(eq(termsAcceptances.orgUid, w.org), eq(termsAcceptances.acceptedBy, w.identity.owner)));
    expect(rows).toHaveLength(2);
    const after = await call("rest", base(), ReposService.method.createRepo, { parent: w.org, repo: { name: "first" } }, w.auth("editor"));
    expect(after.error?.message).toBeUndefined();
  });
});
