// A small organization for tests that need callers: groups, identities and role bindings written straight
// to the database (as bootstrap does), with a token for each caller.
//
//   org                       root group
//   org/team                  child group
//   org/other                 sibling child group
//   callers: owner, editor, viewer (bound on org), teamViewer (viewer on org/team),
//            otherViewer (viewer on org/other: a sibling of team), confined (created under org/team,
//            owner on org: its access is confined to org/team), confinedOther (created under org/other,
//            owner on org: confined to org/other), stranger (no bindings)
import { RelationshipType } from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import { groups, identities, roleBindings } from "../../src/db/schema/index.js";
import { managedRole } from "../../src/iam/managed-roles.js";
import { newChildUid, newRootUid } from "../../src/kernel/uidp.js";
import type { TestServer } from "./server.js";

export type Caller = "owner" | "editor" | "viewer" | "teamViewer" | "otherViewer" | "confined" | "confinedOther" | "stranger";

export interface World {
  org: string;
  team: string;
  other: string;
  identity: Record<Caller, string>;
  token: Record<Caller, string>;
  /** Authorization header for a caller. */
  auth(caller: Caller): Record<string, string>;
}

export async function seedWorld(server: TestServer, name = "acme"): Promise<World> {
  const { db } = server.database;
  const org = newRootUid();
  const team = newChildUid(org);
  const other = newChildUid(org);
  await db.insert(groups).values([
    { uid: org, parentUid: null, name },
    { uid: team, parentUid: org, name: "team" },
    { uid: other, parentUid: org, name: "other" },
  ]);
  const person = (caller: Caller, parentUid: string | null = null) => {
    const uid = parentUid ? newChildUid(parentUid) : newRootUid();
    return {
      uid,
      parentUid,
      name: caller.toLowerCase(),
      relationship: { claimMatch: { issuer: "https://issuer.test", subject: `${caller}-${uid}` } },
      relationshipType: RelationshipType.CLAIM_MATCH,
      issuer: "https://issuer.test",
      subject: `${caller}-${uid}`,
    };
  };
  const rows = {
    owner: person("owner"),
    editor: person("editor"),
    viewer: person("viewer"),
    teamViewer: person("teamViewer"),
    otherViewer: person("otherViewer"),
    confined: person("confined", team),
    confinedOther: person("confinedOther", other),
    stranger: person("stranger"),
  } satisfies Record<Caller, unknown>;
  await db.insert(identities).values(Object.values(rows));
  const bind = (caller: Caller, role: string, group: string) => ({
    uid: newChildUid(group),
    groupUid: group,
    identityUid: rows[caller].uid,
    roleUid: managedRole(role).uid,
  });
  await db.insert(roleBindings).values([
    bind("owner", "owner", org),
    bind("editor", "editor", org),
    bind("viewer", "viewer", org),
    bind("teamViewer", "viewer", team),
    bind("otherViewer", "viewer", other),
    bind("confined", "owner", org),
    bind("confinedOther", "owner", org),
  ]);
  const identity = Object.fromEntries(Object.entries(rows).map(([k, v]) => [k, v.uid])) as Record<Caller, string>;
  const token = Object.fromEntries(
    await Promise.all(Object.entries(identity).map(async ([k, uid]) => [k, await server.token(uid)])),
  ) as Record<Caller, string>;
  return { org, team, other, identity, token, auth: (c) => ({ authorization: `Bearer ${token[c]}` }) };
}

/**
 * A root-level identity (a person) with no bindings, written straight to the database, and the
 * Authorization header of a token for it.
 */
export async function insertPerson(server: TestServer, name: string, email = ""): Promise<{ uid: string; auth: Record<string, string> }> {
  const uid = newRootUid();
  const subject = `subject-${uid}`;
  await server.database.db.insert(identities).values({
    uid,
    parentUid: null,
    name,
    email,
    relationship: { claimMatch: { issuer: "https://issuer.test", subject } },
    relationshipType: RelationshipType.CLAIM_MATCH,
    issuer: "https://issuer.test",
    subject,
  });
  return { uid, auth: { authorization: `Bearer ${await server.token(uid)}` } };
}

/**
 * Identities with an exact claim match on `issuer` and `subject`, written straight to the database: `count`
 * of them under `parent` (null: root-level), each bound with `role` on `bindOn` when given, created at
 * `createTime` (default now). Their uids, in order.
 */
export async function insertClaimMatches(
  server: TestServer,
  opts: { issuer: string; subject: string; parent: string | null; count?: number; bindOn?: string; role?: string; createTime?: Date },
): Promise<string[]> {
  const uids = Array.from({ length: opts.count ?? 1 }, () => (opts.parent ? newChildUid(opts.parent) : newRootUid()));
  await server.database.db.insert(identities).values(
    uids.map((uid) => ({
      uid,
      parentUid: opts.parent,
      name: "claim match",
      relationship: { claimMatch: { issuer: opts.issuer, subject: opts.subject } },
      relationshipType: RelationshipType.CLAIM_MATCH,
      issuer: opts.issuer,
      subject: opts.subject,
      ...(opts.createTime ? { createTime: opts.createTime } : {}),
    })),
  );
  const { bindOn } = opts;
  if (bindOn) {
    await server.database.db
      .insert(roleBindings)
      .values(uids.map((uid) => ({ uid: newChildUid(bindOn), groupUid: bindOn, identityUid: uid, roleUid: managedRole(opts.role ?? "viewer").uid })));
  }
  return uids;
}
