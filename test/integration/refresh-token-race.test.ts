// Concurrent uses of one refresh token (meant for real PostgreSQL, where they do run at once; PGlite runs
// them one after another, which must give the same outcome). Of the uses started together, exactly one gets
// a new pair; the others find the token used, which is reuse: the chain is revoked, so the winner's new
// refresh token is refused afterwards too. Never INTERNAL, never two successors.
import { Code } from "@connectrpc/connect";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RelationshipType } from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import { SecurityTokenService } from "../../gen/platform/oidc/v1/oidc.platform_pb.js";
import { identities, refreshTokens, roleBindings } from "../../src/db/schema/index.js";
import { managedRole } from "../../src/iam/managed-roles.js";
import { newChildUid } from "../../src/kernel/uidp.js";
import { refreshTokenHash } from "../../src/sts/refresh-tokens.store.js";
import { call, type Protocol } from "../contract/harness.js";
import { startFakeIssuer, type FakeIssuer } from "../support/fake-issuer.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld } from "../support/world.js";

const ROUNDS = process.env.DATABASE_URL ? 20 : 3;
const RACERS = 6;

describe("one refresh token used concurrently", () => {
  let server: TestServer;
  let idp: FakeIssuer;
  let token: string;
  beforeAll(async () => {
    server = await startTestServer();
    idp = await startFakeIssuer({ audience: server.baseUrl });
    const org = (await seedWorld(server)).org;
    const uid = newChildUid(org);
    await server.database.db.insert(identities).values({
      uid,
      parentUid: org,
      name: "racer",
      relationship: { claimMatch: { issuer: idp.url, subject: "racer" } },
      relationshipType: RelationshipType.CLAIM_MATCH,
      issuer: idp.url,
      subject: "racer",
    });
    await server.database.db.insert(roleBindings).values({ uid: newChildUid(org), groupUid: org, identityUid: uid, roleUid: managedRole("viewer").uid });
    token = await idp.mint({ sub: "racer" }, { ttlSeconds: 3600 });
  });
  afterAll(async () => {
    await server?.close();
    await idp?.close();
  });

  it(`succeeds at most once, and the reuse revokes the winner's chain (${ROUNDS} rounds of ${RACERS})`, async () => {
    const protocols: Protocol[] = ["grpc", "connect-json", "rest"];
    for (let round = 0; round < ROUNDS; round++) {
      const exchanged = await call("connect-json", server.baseUrl, SecurityTokenService.method.exchange, { scope: "offline_access" }, { authorization: `Bearer ${token}` });
      expect(exchanged.error, exchanged.error?.message).toBeUndefined();
      const presented = exchanged.message!.refreshToken;
      const outs = await Promise.all(
        Array.from({ length: RACERS }, (_, i) =>
          call(protocols[i % protocols.length]!, server.baseUrl, SecurityTokenService.method.exchangeRefreshToken, {}, { authorization: `Bearer ${presented}` }),
        ),
      );
      const won = outs.filter((o) => !o.error);
      expect(won).toHaveLength(1);
      for (const o of outs) if (o.error) expect(Code[o.error.code], o.error.message).toBe(Code[Code.Unauthenticated]);
      const [row] = await server.database.db.select().from(refreshTokens).where(eq(refreshTokens.tokenHash, refreshTokenHash(presented)));
      const chain = await server.database.db.select().from(refreshTokens).where(eq(refreshTokens.chainId, row!.chainId));
      expect(chain).toHaveLength(2); // the presented token and one successor
      for (const r of chain) expect(r.revokeTime).not.toBeNull();
      const next = await call("connect-json", server.baseUrl, SecurityTokenService.method.exchangeRefreshToken, {}, {
        authorization: `Bearer ${won[0]!.message!.refreshToken!.token}`,
      });
      expect(next.error?.code).toBe(Code.Unauthenticated);
    }
  });
});
