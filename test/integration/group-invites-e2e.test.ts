// Group invites end to end, over REST as a person would use them, with tokens of an OIDC issuer this test
// runs: the owner invites, the person (who has no identity yet) accepts with a token of their own provider
// and then calls the API with that same token, through the binding the invite promised. Also: a single-use
// code works once (and of concurrent accepts exactly one wins: run it on PostgreSQL too); an expired, unknown,
// used-up or wrong-email code, and a token that does not verify, all get the very same refusal; refusals are
// rate-limited per caller; what an acceptance changes is recorded as events, never with the code. An invite
// is kept only while the identity that made it could still make it.
import { and, eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { groupInvites, identities, outboxEvents, roleBindings } from "../../src/db/schema/index.js";
import { newInviteCode } from "../../src/iam/group-invite-code.js";
import { managedRole } from "../../src/iam/managed-roles.js";
import { startFakeIssuer, type FakeIssuer } from "../support/fake-issuer.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { insertPerson, seedWorld, type World } from "../support/world.js";
import { newChildUid } from "../../src/kernel/uidp.js";

let server: TestServer;
let world: World;
let idp: FakeIssuer;
let seq = 0;
const unique = (prefix: string) => `${prefix}-${++seq}`;
const viewer = managedRole("viewer").uid;

beforeAll(async () => {
  server = await startTestServer();
  world = await seedWorld(server, "invites");
  idp = await startFakeIssuer({ audience: server.baseUrl });
});
afterAll(async () => {
  await server?.close();
  await idp?.close();
});

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

async function api(base: string, method: string, path: string, token: string, body?: unknown) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Json };
}

const invite = async (body: Json, s = server, token = world.token.owner, group = world.team) => {
  const out = await api(s.baseUrl, "POST", `/iam/v2/groupInvites/${group}`, token, { roleUid: viewer, ttl: "3600s", ...body });
  expect(out.status, JSON.stringify(out.json)).toBe(200);
  return out.json as { uid: string; code: string; keyId: string };
};
const accept = (code: string, token: string, s = server) => api(s.baseUrl, "POST", "/iam/v2/groupInvites:accept", token, { code });
/** What a refusal looks like to its caller: status, gRPC code, reason and message. */
const refusalOf = (out: { status: number; json: Json }) => ({
  status: out.status,
  code: out.json.code as number,
  reason: (out.json.details as Json[] | undefined)?.find((d) => String(d["@type"]).endsWith("ErrorInfo"))?.reason as string,
  message: out.json.message as string,
});

describe("an invite, accepted by a person with no identity yet, through the API", () => {
  it("create, accept with an external token, call the API with it; the single-use code then refused", async () => {
    const sub = unique("pat");
    const token = await idp.mint({ sub, name: "Pat", email: "Pat@Example.com", email_verified: true });
    // No identity yet: the token is refused on an ordinary call.
    expect((await api(server.baseUrl, "GET", `/iam/v2/groups/${world.team}`, token)).status).toBe(401);

    const made = await invite({ email: "pat@example.com", singleUse: true });
    expect(made.code.startsWith(`cginv_${made.keyId}.`)).toBe(true);
    // Get and List show the key id, never the code.
    const got = await api(server.baseUrl, "GET", `/iam/v2/groupInvites/${made.uid}`, world.token.owner);
    expect(got.json.keyId).toBe(made.keyId);
    expect(JSON.stringify(got.json)).not.toContain(made.code);
    const listed = await api(server.baseUrl, "GET", `/iam/v2/groupInvites?keyId=${made.keyId}`, world.token.owner);
    expect(listed.json.groupInvites.map((i: Json) => i.uid)).toEqual([made.uid]);
    expect(JSON.stringify(listed.json)).not.toContain(made.code);

    const accepted = await accept(made.code, token);
    expect(accepted.status, JSON.stringify(accepted.json)).toBe(200);
    expect(accepted.json).toMatchObject({ groupUid: world.team, roleUid: viewer });
    const identity = accepted.json.identityUid as string;

    // The same token now acts as the new identity, through the invite's binding (viewer on team).
    const group = await api(server.baseUrl, "GET", `/iam/v2/groups/${world.team}`, token);
    expect(group.status, JSON.stringify(group.json)).toBe(200);
    expect(group.json.uid).toBe(world.team);
    // ... and no further: the organization is beyond the binding.
    expect((await api(server.baseUrl, "GET", `/iam/v2/groups/${world.org}`, token)).status).toBe(403);
    const [row] = await server.database.db.select().from(identities).where(eq(identities.uid, identity));
    expect(row).toMatchObject({ parentUid: world.team, issuer: idp.url, subject: sub, email: "Pat@Example.com" });

    // The single-use invite is gone; its code is refused now, as an unknown code is.
    expect((await api(server.baseUrl, "GET", `/iam/v2/groupInvites/${made.uid}`, world.token.owner)).status).toBe(404);
    const second = await accept(made.code, token);
    const unknown = await accept(newInviteCode().code, token);
    expect(refusalOf(second)).toEqual(refusalOf(unknown));
    expect(refusalOf(second)).toMatchObject({ status: 403, code: 7, reason: "INVITE_CODE_INVALID" });

    // The changes were recorded as the events of the methods that make them, by the new identity, never
    // with the code.
    const events = await server.database.db.select().from(outboxEvents).where(eq(outboxEvents.actor, identity));
    expect(events.map((e) => e.type).sort()).toEqual([
      "dev.chainguard.api.iam.group_invite.deleted.v1",
      "dev.chainguard.api.iam.identity.created.v1",
      "dev.chainguard.api.iam.rolebindings.created.v1",
    ]);
    for (const e of events) expect(e.method).toBe("/apiserver.iam.v1.GroupInviteAcceptanceService/AcceptGroupInvite");
    const all = await server.database.db.select({ body: outboxEvents.body }).from(outboxEvents);
    expect(JSON.stringify(all)).not.toContain(made.code.split(".")[1]);
  });

  it("an expired code, a wrong email, an unverified email and a token that does not verify are refused as an unknown code is", async () => {
    const sub = unique("sam");
    const token = await idp.mint({ sub, email: "sam@example.com", email_verified: true });
    const unknown = refusalOf(await accept(newInviteCode().code, token));

    const expired = await invite({});
    await server.database.db.update(groupInvites).set({ expirationTime: sql`now() - interval '1 second'` }).where(eq(groupInvites.uid, expired.uid));
    expect(refusalOf(await accept(expired.code, token))).toEqual(unknown);

    const forAna = await invite({ email: "ana@example.com" });
    expect(refusalOf(await accept(forAna.code, token))).toEqual(unknown);
    const unverified = await idp.mint({ sub: unique("ana"), email: "ana@example.com", email_verified: false });
    expect(refusalOf(await accept(forAna.code, unverified))).toEqual(unknown);

    const open = await invite({ singleUse: true });
    const forged = await idp.mint({ sub: unique("forger") }, { unpublishedKey: true });
    expect(refusalOf(await accept(open.code, forged))).toEqual(unknown);
    // A token for another audience (meant for some other application) too.
    const elsewhere = await idp.mint({ sub: unique("other-app"), aud: "https://elsewhere.example" });
    expect(refusalOf(await accept(open.code, elsewhere))).toEqual(unknown);
    // An expired token, or none, is UNAUTHENTICATED before any code is looked at.
    const stale = await idp.mint({ sub: unique("late") }, { ttlSeconds: -600 });
    expect((await accept(open.code, stale)).status).toBe(401);
    const none = await fetch(`${server.baseUrl}/iam/v2/groupInvites:accept`, { method: "POST", body: JSON.stringify({ code: open.code }) });
    expect(none.status).toBe(401);
    // None of them consumed the single-use code.
    expect((await accept(open.code, token)).status).toBe(200);
  });

  it("a caller who already has an identity (this server's token) accepts too: an identity in the group for it", async () => {
    const made = await invite({}, server, world.token.owner, world.other);
    const out = await accept(made.code, world.token.stranger);
    expect(out.status, JSON.stringify(out.json)).toBe(200);
    const [row] = await server.database.db.select().from(identities).where(eq(identities.uid, out.json.identityUid as string));
    expect(row).toMatchObject({ parentUid: world.other, issuer: server.baseUrl, subject: world.identity.stranger });
  });
});

describe("an invite whose maker is gone", () => {
  /** A person who is owner of the world's organization, and a token for them. */
  const newMaker = async () => {
    const maker = await insertPerson(server, unique("maker"));
    const binding = newChildUid(world.org);
    await server.database.db.insert(roleBindings).values({ uid: binding, groupUid: world.org, identityUid: maker.uid, roleUid: managedRole("owner").uid });
    return { ...maker, binding, token: maker.auth.authorization!.slice("Bearer ".length) };
  };
  const refusedCode = (out: { status: number; json: Json }) => expect(refusalOf(out)).toMatchObject({ status: 403, reason: "INVITE_CODE_INVALID" });

  it("ends with the identity that made it", async () => {
    const maker = await newMaker();
    const made = await invite({}, server, maker.token);
    await server.database.db.delete(identities).where(eq(identities.uid, maker.uid));
    refusedCode(await accept(made.code, await idp.mint({ sub: unique("invitee") })));
    expect(await server.database.db.select().from(groupInvites).where(eq(groupInvites.uid, made.uid))).toEqual([]);
  });

  it("is refused while its maker no longer holds what making it needed, or is deactivated", async () => {
    const maker = await newMaker();
    const made = await invite({}, server, maker.token);
    await server.database.db.delete(roleBindings).where(eq(roleBindings.uid, maker.binding));
    refusedCode(await accept(made.code, await idp.mint({ sub: unique("invitee") })));
    // Bound again: the invite is good again (it was not used up by the refusal).
    await server.database.db.insert(roleBindings).values({ uid: newChildUid(world.org), groupUid: world.org, identityUid: maker.uid, roleUid: managedRole("owner").uid });
    const invitee = await idp.mint({ sub: unique("invitee") });
    expect((await accept(made.code, invitee)).status).toBe(200);
    await server.database.db.update(identities).set({ active: false }).where(eq(identities.uid, maker.uid));
    refusedCode(await accept(made.code, await idp.mint({ sub: unique("invitee") })));
  });
});

describe("concurrent accepts of one single-use code", () => {
  it("exactly one wins", async () => {
    const made = await invite({ singleUse: true });
    const tokens = await Promise.all(Array.from({ length: 6 }, () => idp.mint({ sub: unique("racer") })));
    const outs = await Promise.all(tokens.map((t) => accept(made.code, t)));
    const statuses = outs.map((o) => o.status).sort();
    expect(statuses).toEqual([200, 403, 403, 403, 403, 403]);
    const winner = outs.find((o) => o.status === 200)!.json.identityUid as string;
    const bound = await server.database.db
      .select({ identity: roleBindings.identityUid })
      .from(roleBindings)
      .innerJoin(identities, eq(identities.uid, roleBindings.identityUid))
      .where(and(eq(roleBindings.groupUid, world.team), sql`${identities.subject} like 'racer-%'`));
    expect(bound.map((b) => b.identity)).toEqual([winner]);
  });
});

describe("refused acceptances are rate-limited per caller", () => {
  let limited: TestServer;
  let limitedWorld: World;
  beforeAll(async () => {
    limited = await startTestServer({
      rateLimits: { inviteFailures: { bySubject: { burst: 2, perMinute: 1 }, byAddress: { burst: 1000, perMinute: 1000 } } },
    });
    limitedWorld = await seedWorld(limited, "limited");
  });
  afterAll(async () => {
    await limited?.close();
  });

  it("after its budget of refusals of its verified token a caller gets RESOURCE_EXHAUSTED, even with a good code; another caller does not", async () => {
    const made = await invite({}, limited, limitedWorld.token.owner, limitedWorld.team);
    // Refused once the token verified: the invite is for an email address the token does not carry.
    const forSomeoneElse = await invite({ email: "someone-else@example.com" }, limited, limitedWorld.token.owner, limitedWorld.team);
    const sub = unique("guesser");
    const issuer = await startFakeIssuer({ audience: limited.baseUrl });
    try {
      const token = await issuer.mint({ sub });
      for (let i = 0; i < 2; i++) expect((await accept(forSomeoneElse.code, token, limited)).status).toBe(403);
      const blocked = await accept(made.code, token, limited);
      expect(blocked.status).toBe(429);
      expect(refusalOf(blocked).reason).toBe("TOO_MANY_FAILURES");
      const other = await issuer.mint({ sub: unique("honest") });
      expect((await accept(made.code, other, limited)).status).toBe(200);
    } finally {
      await issuer.close();
    }
  });

  it("refusals of tokens that did not verify count by address only: tokens claiming a person's subject do not lock the person out", async () => {
    const made = await invite({}, limited, limitedWorld.token.owner, limitedWorld.team);
    const sub = unique("victim");
    const issuer = await startFakeIssuer({ audience: limited.baseUrl });
    try {
      // Unknown codes (the token is never verified) and a live code with a token signed by another key.
      for (let i = 0; i < 3; i++) expect((await accept(newInviteCode().code, await issuer.mint({ sub, jti: unique("j") }, { unpublishedKey: true }), limited)).status).toBe(403);
      for (let i = 0; i < 3; i++) expect((await accept(made.code, await issuer.mint({ sub, jti: unique("j") }, { unpublishedKey: true }), limited)).status).toBe(403);
      const genuine = await accept(made.code, await issuer.mint({ sub }), limited);
      expect(genuine.status, JSON.stringify(genuine.json)).toBe(200);
    } finally {
      await issuer.close();
    }
  });
});
