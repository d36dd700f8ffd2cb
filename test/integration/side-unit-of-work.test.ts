// A write outside the API's methods gets what the unit of work gives an RPC (kernel/unit-of-work.ts
// runUnitOfWork), shown on a login through an identity provider (iam/sso-login.ts), called directly:
//
//   events       a first login's changes (identity created, default binding created) are recorded with it,
//                in its transaction, as the token exchange's
//   grants       the remembered grants are forgotten once the transaction has ended, and only when the login
//                changed something
//   abort        a login whose call was aborted before its commit changes nothing and records nothing
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { IdentityProvider_OIDC_CorrelationRule as CorrelationRule } from "../../gen/chainguard/platform/iam/v2/identity_providers_pb.js";
import type { Db } from "../../src/db/client.js";
import { identities, identityProviders, roleBindings } from "../../src/db/schema/index.js";
import { outboxEvents } from "../../src/db/schema/outbox.js";
import { managedRole } from "../../src/iam/managed-roles.js";
import { createProviderLogin } from "../../src/iam/sso-login.js";
import type { VerifiedIdToken } from "../../src/kernel/auth/external.js";
import { newChildUid } from "../../src/kernel/uidp.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";

const ISSUER = "https://idp.example";

let server: TestServer;
let acme: World;
let providerUid: string;

beforeAll(async () => {
  server = await startTestServer();
  acme = await seedWorld(server, "acme");
  providerUid = newChildUid(acme.org);
  await server.database.db.insert(identityProviders).values({
    uid: providerUid,
    groupUid: acme.org,
    name: "okta",
    defaultRoleUid: managedRole("viewer").uid,
    oidcIssuer: ISSUER,
    oidcClientId: "client-a",
    oidcCorrelationRule: CorrelationRule.SUB_EQUALS_EXTERNAL_ID,
  });
});

afterAll(async () => {
  await server?.close();
});

/** A login over the test database, whose transactions' ends and grant forgetting are written to `trace`. */
function tracedLogin() {
  const trace: string[] = [];
  const real = server.database.db;
  const db = new Proxy(real, {
    get(target, prop) {
      if (prop === "transaction") {
        return async (...args: Parameters<typeof real.transaction>) => {
          try {
            return await target.transaction(...args);
          } finally {
            trace.push("transaction ended");
          }
        };
      }
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  }) as Db;
  // The provider's client is looked up as the real verifier does; the token's signature is not the point here.
  const verifier = {
    async verifyIdToken(token: string, client: () => Promise<{ issuer: string; clientId: string } | undefined>): Promise<VerifiedIdToken> {
      if (!(await client())) throw new Error("no such client");
      return { issuer: ISSUER, subject: token, expiresAt: Math.floor(Date.now() / 1000) + 600, claims: { sub: token, name: token } };
    },
  };
  const login = createProviderLogin({ db, verifier, grantsChanged: () => trace.push("grants forgotten") });
  return { trace, login };
}

async function identityOf(subject: string) {
  const [row] = await server.database.db.select().from(identities).where(eq(identities.externalId, subject));
  return row;
}

describe("a login through an identity provider is a unit of work", () => {
  it("records a first login's events in its transaction and forgets the grants after the commit; a login changing nothing keeps them", async () => {
    const { trace, login } = tracedLogin();
    const found = await login.login(providerUid, "ada");
    expect(trace).toEqual(["transaction ended", "grants forgotten"]);

    const [binding] = await server.database.db.select().from(roleBindings).where(eq(roleBindings.identityUid, found.identityUid));
    const events = await server.database.db.select().from(outboxEvents).where(eq(outboxEvents.actor, found.identityUid));
    expect(events.map((e) => `${e.type} ${e.subject}`).sort()).toEqual(
      [`dev.chainguard.api.iam.identity.created.v1 ${found.identityUid}`, `dev.chainguard.api.iam.rolebindings.created.v1 ${binding!.uid}`].sort(),
    );
    for (const e of events) expect(e.method).toBe("/chainguard.platform.oidc.SecurityTokenService/Exchange");

    trace.length = 0;
    await login.login(providerUid, "ada");
    expect(trace).toEqual(["transaction ended"]);
    expect(await server.database.db.select().from(outboxEvents).where(eq(outboxEvents.actor, found.identityUid))).toHaveLength(events.length);
  });

  it("changes and records nothing when the call was aborted before the commit", async () => {
    const { trace, login } = tracedLogin();
    const reason = new Error("the client went away");
    await expect(login.login(providerUid, "grace", AbortSignal.abort(reason))).rejects.toBe(reason);
    expect(await identityOf("grace")).toBeUndefined();
    const events = await server.database.db.select().from(outboxEvents).where(eq(outboxEvents.method, "/chainguard.platform.oidc.SecurityTokenService/Exchange"));
    expect(events.filter((e) => (e.body as { name?: string } | null)?.name === "grace")).toEqual([]);
    // Whether a failed work's commit happened may be unknown: the grants are forgotten all the same.
    expect(trace).toEqual(["transaction ended", "grants forgotten"]);
  });
});
