// Refresh tokens (db/schema/refresh-tokens.ts): issued by Exchange, rotated by ExchangeRefreshToken.
//
// A token is "cgrt_" and 32 random bytes (base64url); only its sha256 is stored, so neither the database nor
// a log or event holds anything that can be presented. Rotation claims the presented token with one
// conditional UPDATE (unused, unrevoked, unexpired): of concurrent uses of one token, the first to lock the
// row claims it and the others find it used, which is reuse. Reuse revokes every token of the chain, the
// one just issued to the winner included, in its own committed transaction (the refusal that follows must
// not roll it back): a stolen token and its legitimate holder cannot be told apart, so neither keeps going.
//
// Lifetime. A chain ends a fixed time (the refresh token lifetime) after the exchange that started it: each
// rotation issues a token that expires at the same end, never later, so using a chain does not keep it
// alive forever. A chain started by a login through an identity provider also records the bindings the
// provider's group mappings gave the identity at that login; it ends at the first refresh that finds them
// changed (a later login with other groups, a mapping removed or its bindings deleted), so the person logs in
// again and the provider's groups are read afresh. The server learns of group changes at the provider only
// from a login, so a removal from a provider's group takes effect at the next login (on any device), and at
// the latest when the chain ends.
import { createHash, randomBytes, randomUUID } from "node:crypto";
import { and, eq, gt, isNotNull, isNull, or, sql } from "drizzle-orm";
import type { Capability } from "../../gen/capabilities/capabilities_pb.js";
import type { Db } from "../db/client.js";
import { identities, refreshTokens, roleBindings } from "../db/schema/index.js";
import type { TokenRestriction } from "../kernel/auth/index.js";
import { log } from "../kernel/log.js";
import type { Executor } from "../kernel/store.js";

export const REFRESH_TOKEN_PREFIX = "cgrt_";

/** The default lifetime of a refresh token chain: 30 days from the exchange that started it. */
export const DEFAULT_REFRESH_TOKEN_TTL_SECONDS = 30 * 24 * 3600;

/** Longest token looked up; a longer one is unknown without hashing it. */
const MAX_REFRESH_TOKEN_CHARS = 256;

export type RefreshTokenRow = typeof refreshTokens.$inferSelect;

/** What a chain is bound to, from the exchange that started it. */
export interface RefreshBinding {
  identityUid: string;
  /** The access tokens' audience as asked; empty: this server's issuer URL. */
  audience: string[];
  upstream: { issuer: string; subject: string };
  /** Seconds since the epoch that nothing of the chain outlives (besides its lifetime); undefined: no cap. */
  notAfter?: number | undefined;
  /** What the chain's access tokens are restricted to (the exchange's scopes and cap); undefined: nothing. */
  restriction?: TokenRestriction | undefined;
  /** A login through an identity provider: the chain ends when the identity's mapped bindings change. */
  providerLogin?: boolean | undefined;
}

export interface IssuedRefreshToken {
  token: string;
  expireTime: Date;
}

/** Why a presented token was refused. Callers answer all of them alike (no oracle). */
export type RefreshRefusal = "unknown" | "expired" | "reused" | "revoked" | "identity-inactive" | "identity-unbound" | "mapped-roles-changed";

export class RefreshRefused extends Error {
  constructor(
    readonly why: RefreshRefusal,
    /** The identity and chain the token belonged to, when it was found (for the log: never the token). */
    readonly found?: { identityUid: string; chainId: string },
  ) {
    super(`refresh token refused: ${why}`);
  }
}

export function refreshTokenHash(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

export interface RefreshTokenStore {
  /** Starts a chain: the first refresh token of an exchange. */
  issue(binding: RefreshBinding, ttlSeconds: number): Promise<IssuedRefreshToken>;
  /**
   * Uses `token` up and issues its successor, in one transaction with `use` (which mints the access token
   * and may throw to refuse: nothing is then used up). Throws RefreshRefused when the token is not one that
   * can be used now; a reused token's chain has then been revoked.
   */
  rotate<T>(token: string, ttlSeconds: number, use: (row: RefreshTokenRow) => Promise<T>): Promise<{ result: T; next: IssuedRefreshToken }>;
}

function newToken(): string {
  return REFRESH_TOKEN_PREFIX + randomBytes(32).toString("base64url");
}

function expiry(ttlSeconds: number, notAfter: Date | null): Date {
  const end = Date.now() + ttlSeconds * 1000;
  return new Date(notAfter ? Math.min(end, notAfter.getTime()) : end);
}

/** The identity's bindings made by group mappings, as "<role uid>@<group uid>", sorted. */
async function mappedRolesOf(ex: Executor, identityUid: string): Promise<string[]> {
  const rows = await ex
    .select({ roleUid: roleBindings.roleUid, groupUid: roleBindings.groupUid })
    .from(roleBindings)
    .where(and(eq(roleBindings.identityUid, identityUid), isNotNull(roleBindings.mappingUid)));
  return rows.map((r) => `${r.roleUid}@${r.groupUid}`).sort();
}

const sameList = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((x, i) => x === b[i]);

export function createRefreshTokenStore(db: Db): RefreshTokenStore {
  /** Expired rows are deleted a batch at a time whenever a token is issued; locked ones are left for later. */
  async function prune(): Promise<void> {
    try {
      await db.execute(sql`
        DELETE FROM ${refreshTokens} WHERE ${refreshTokens.id} IN (
          SELECT ${refreshTokens.id} FROM ${refreshTokens} WHERE ${refreshTokens.expireTime} < now()
          ORDER BY ${refreshTokens.expireTime} LIMIT 100 FOR UPDATE SKIP LOCKED)`);
    } catch (err) {
      log.warn("pruning expired refresh tokens failed", { err });
    }
  }

  /** Revokes every token of the chain (committed on its own); whether any was still unrevoked. */
  async function revokeChain(chainId: string): Promise<boolean> {
    const revoked = await db
      .update(refreshTokens)
      .set({ revokeTime: sql`now()` })
      .where(and(eq(refreshTokens.chainId, chainId), isNull(refreshTokens.revokeTime)))
      .returning({ id: refreshTokens.id });
    return revoked.length > 0;
  }

  /** Why `hash` could not be claimed, revoking its chain when that is reuse. */
  async function refusal(hash: string): Promise<RefreshRefused> {
    const [row] = await db.select().from(refreshTokens).where(eq(refreshTokens.tokenHash, hash)).limit(1);
    if (!row) return new RefreshRefused("unknown");
    const found = { identityUid: row.identityUid, chainId: row.chainId };
    if (row.revokeTime) return new RefreshRefused("revoked", found);
    if (row.usedTime) {
      if (await revokeChain(row.chainId)) log.warn("refresh token reused: its chain is revoked", found);
      return new RefreshRefused("reused", found);
    }
    return new RefreshRefused("expired", found);
  }

  return {
    async issue(binding, ttlSeconds) {
      const token = newToken();
      // The chain's end: its lifetime from now, or the identity's own expiry when sooner.
      const notAfter = expiry(ttlSeconds, binding.notAfter !== undefined ? new Date(binding.notAfter * 1000) : null);
      const id = randomUUID();
      const expireTime = notAfter;
      const mappedRoles = binding.providerLogin ? await mappedRolesOf(db, binding.identityUid) : null;
      await db.insert(refreshTokens).values({
        id,
        chainId: id,
        identityUid: binding.identityUid,
        audience: binding.audience,
        upstreamIssuer: binding.upstream.issuer,
        upstreamSubject: binding.upstream.subject,
        scopes: binding.restriction?.scopes ? [...binding.restriction.scopes] : null,
        capabilities: binding.restriction?.capabilities ? [...binding.restriction.capabilities] : null,
        notAfter,
        mappedRoles,
        tokenHash: refreshTokenHash(token),
        expireTime,
      });
      await prune();
      return { token, expireTime };
    },

    async rotate<T>(token: string, ttlSeconds: number, use: (row: RefreshTokenRow) => Promise<T>) {
      if (token.length > MAX_REFRESH_TOKEN_CHARS || !token.startsWith(REFRESH_TOKEN_PREFIX)) throw new RefreshRefused("unknown");
      const hash = refreshTokenHash(token);
      type Rotated = { result: T; next: IssuedRefreshToken } | { ended: { identityUid: string; chainId: string } } | undefined;
      const out = await db.transaction(async (tx): Promise<Rotated> => {
        const [row] = await tx
          .update(refreshTokens)
          .set({ usedTime: sql`now()` })
          .where(
            and(
              eq(refreshTokens.tokenHash, hash),
              isNull(refreshTokens.usedTime),
              isNull(refreshTokens.revokeTime),
              gt(refreshTokens.expireTime, sql`now()`),
              or(isNull(refreshTokens.notAfter), gt(refreshTokens.notAfter, sql`now()`)),
            ),
          )
          .returning();
        if (!row) return undefined;
        const found = { identityUid: row.identityUid, chainId: row.chainId };
        // The identity must still be active and hold a binding. KEY SHARE: the binding cannot be deleted
        // before this commits, so the deletion's trigger (migration refresh_tokens_end) sees the successor.
        const [identity] = await tx.select({ active: identities.active }).from(identities).where(eq(identities.uid, row.identityUid)).for("key share");
        if (!identity?.active) throw new RefreshRefused("identity-inactive", found);
        const [binding] = await tx.select({ uid: roleBindings.uid }).from(roleBindings).where(eq(roleBindings.identityUid, row.identityUid)).limit(1).for("key share");
        if (!binding) throw new RefreshRefused("identity-unbound", found);
        // The roles the provider's groups gave at the login changed: the chain ends (after this commits).
        if (row.mappedRoles && !sameList(row.mappedRoles, await mappedRolesOf(tx, row.identityUid))) return { ended: found };

        // A chain started before every chain had an end gets one now.
        const notAfter = row.notAfter ?? expiry(ttlSeconds, null);
        const result = await use({ ...row, notAfter });
        const next = newToken();
        const expireTime = expiry(ttlSeconds, notAfter);
        await tx.insert(refreshTokens).values({
          chainId: row.chainId,
          identityUid: row.identityUid,
          audience: row.audience,
          upstreamIssuer: row.upstreamIssuer,
          upstreamSubject: row.upstreamSubject,
          scopes: row.scopes,
          capabilities: row.capabilities,
          notAfter,
          mappedRoles: row.mappedRoles,
          tokenHash: refreshTokenHash(next),
          expireTime,
        });
        return { result, next: { token: next, expireTime } };
      });
      if (!out) throw await refusal(hash);
      if ("ended" in out) {
        const { ended } = out;
        await revokeChain(ended.chainId);
        log.info("refresh token chain ended: the roles mapped from the provider's groups changed since the login", ended);
        throw new RefreshRefused("mapped-roles-changed", ended);
      }
      await prune();
      return out;
    },
  };
}

/** The restriction a chain's row carries (see RefreshBinding.restriction). */
export function restrictionOfRow(row: Pick<RefreshTokenRow, "scopes" | "capabilities">): TokenRestriction | undefined {
  if (row.scopes === null && row.capabilities === null) return undefined;
  return {
    ...(row.scopes !== null ? { scopes: row.scopes } : {}),
    ...(row.capabilities !== null ? { capabilities: row.capabilities as Capability[] } : {}),
  };
}
