// Two server processes on one PostgreSQL database, as replicas behind a load balancer: what one does, the
// other honours. A token minted by one is accepted by the other; a page token from one continues on the
// other; a binding removed through one stops granting on the other at once (NOTIFY, not the grants cache's
// 10 s); a key rotated (npm run keys:rotate) is the one both sign with at once; a removed key stops
// verifying on both, also for tokens they had verified before (their verified-token caches).
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { Code } from "@connectrpc/connect";
import { decodeProtectedHeader } from "jose";
import { eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { RoleBindingsService } from "../../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import { SecurityTokenService } from "../../gen/platform/oidc/v1/oidc.platform_pb.js";
import { RelationshipType } from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import { groups, identities, roleBindings, signingKeys } from "../../src/db/schema/index.js";
import { pruneRetiredKeys } from "../../src/kernel/auth/keys.js";
import { newChildUid } from "../../src/kernel/uidp.js";
import { call } from "../contract/harness.js";
import { until } from "../support/poll.js";
import { createScratchDatabase, openDirect, startServerProcess, TEST_ISSUER, type DirectAccess, type ScratchDatabase, type ServerProcess } from "../support/server-process.js";
import type { World } from "../support/world.js";

/**
 * How long a change made through one replica may take to reach the other, in these tests: far more than a
 * notification needs, and less than what the caches would take without one (grants 10 s, keys 60 s, a
 * verified token until it expires), so each check fails when the notification does not arrive.
 */
const DEADLINE_MS = 5_000;

describe.skipIf(!process.env.DATABASE_URL)("two replicas on one database (PostgreSQL)", () => {
  let scratch: ScratchDatabase;
  let a: ServerProcess;
  let b: ServerProcess;
  let direct: DirectAccess;
  let world: World;

  beforeAll(async () => {
    scratch = await createScratchDatabase();
    a = await startServerProcess(scratch.url);
    b = await startServerProcess(scratch.url);
    direct = await openDirect(scratch.url);
    world = await direct.world();
    self = newChildUid(world.org);
    const claimMatch = { issuer: TEST_ISSUER, subject: self };
    await direct.db.insert(identities).values({
      uid: self,
      parentUid: world.org,
      name: "self",
      relationship: { claimMatch },
      relationshipType: RelationshipType.CLAIM_MATCH,
      ...claimMatch,
    });
  }, 60_000);
  afterAll(async () => {
    await Promise.all([a?.kill(), b?.kill()]);
    await direct?.close();
    await scratch?.dispose();
  });

  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const getGroup = async (server: ServerProcess, uid: string, token: string) =>
    (await call("grpc", server.baseUrl, GroupsService.method.getGroup, { uid }, bearer(token))).error?.code ?? "ok";
  /**
   * The kid of a token the server mints now: `self` (an identity whose claimMatch names this service's own
   * issuer and the identity's uid) exchanges a token for itself.
   */
  let self: string;
  const signingKid = async (server: ServerProcess) => {
    const token = await direct.token(self);
    const out = await call("connect-json", server.baseUrl, SecurityTokenService.method.exchange, { identity: self }, bearer(token));
    if (out.error) throw new Error(`exchange on ${server.baseUrl}: ${out.error.code} ${out.error.message}`);
    return decodeProtectedHeader(out.message.token).kid;
  };

  it("a token minted by one is accepted by the other", async () => {
    expect(await getGroup(b, a.organization, a.token)).toBe("ok");
    expect(await getGroup(a, b.organization, b.token)).toBe("ok");
  });

  it("a page token from one continues on the other", async () => {
    const names = ["one", "two", "three", "four"];
    await direct.db.insert(groups).values(names.map((name) => ({ uid: newChildUid(world.org), parentUid: world.org, name })));
    const seen: string[] = [];
    let pageToken = "";
    for (let i = 0; i < names.length; i++) {
      const server = i % 2 === 0 ? a : b;
      const out = await call("grpc", server.baseUrl, GroupsService.method.listGroups, { uidp: { childrenOf: world.org }, pageSize: 1, pageToken }, world.auth("viewer"));
      expect(out.error).toBeUndefined();
      seen.push(...out.message!.groups.map((g) => g.name));
      pageToken = out.message!.nextPageToken;
    }
    // Four pages of one, alternating replicas: never the same group twice.
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen).toHaveLength(names.length);
  });

  it("a binding removed through one stops granting on the other at once", async () => {
    const [binding] = await direct.db.select().from(roleBindings).where(eq(roleBindings.identityUid, world.identity.viewer));
    // b remembers the viewer's grants now.
    expect(await getGroup(b, world.org, world.token.viewer)).toBe("ok");
    const out = await call("grpc", a.baseUrl, RoleBindingsService.method.deleteRoleBinding, { uid: binding!.uid }, world.auth("owner"));
    expect(out.error).toBeUndefined();
    expect(await getGroup(a, world.org, world.token.viewer)).toBe(Code.PermissionDenied);
    await until("b refusing the viewer", () => getGroup(b, world.org, world.token.viewer), (c) => c === Code.PermissionDenied, DEADLINE_MS);
  });

  it("a key rotated (npm run keys:rotate) is the one both sign with", async () => {
    const before = decodeProtectedHeader(a.token).kid;
    expect(await signingKid(a)).toBe(before);
    expect(await signingKid(b)).toBe(before);
    const env = { ...process.env, DATABASE_URL: scratch.url, LOG_LEVEL: "warn" };
    const { stdout } = await promisify(execFile)("npm", ["run", "--silent", "keys:rotate"], { env, cwd: process.cwd() });
    const { kid } = JSON.parse(stdout.trim()) as { kid: string };
    expect(kid).not.toBe(before);
    for (const server of [a, b]) {
      await until(`${server.baseUrl} signing with the new key`, () => signingKid(server), (k) => k === kid, DEADLINE_MS);
    }
  }, 60_000);

  it("a removed key stops verifying on both, also tokens they had already verified", async () => {
    // a.token is signed with the key retired above; both have verified it (and remember that).
    const old = decodeProtectedHeader(a.token).kid!;
    expect(await getGroup(a, a.organization, a.token)).toBe("ok");
    expect(await getGroup(b, a.organization, a.token)).toBe("ok");
    // Retired longer ago than any token lives, then pruned as `keys:rotate` prunes.
    await direct.db.update(signingKeys).set({ retireTime: sql`now() - interval '2 days'` }).where(eq(signingKeys.kid, old));
    await pruneRetiredKeys(direct.db);
    expect(await direct.db.select().from(signingKeys).where(eq(signingKeys.kid, old))).toHaveLength(0);
    for (const server of [a, b]) {
      await until(`${server.baseUrl} refusing the removed key's token`, () => getGroup(server, a.organization, a.token), (c) => c === Code.Unauthenticated, DEADLINE_MS);
    }
  });
});
