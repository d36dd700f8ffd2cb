// This server's signing keys, kept in the database so every replica signs and verifies with the same set.
// The first start generates an ES256 key; `rotate()` adds a new one that takes over signing while older keys
// keep verifying (and stay published) until every token they signed has expired.
import { randomBytes, type webcrypto } from "node:crypto";
import { desc, isNull, lt, or, sql } from "drizzle-orm";
import { exportJWK, generateKeyPair, importJWK, type JWK } from "jose";
import type { Db } from "../../db/client.js";
import { signingKeys } from "../../db/schema/index.js";
import { log } from "../log.js";
import type { Subscribe } from "./grants-cache.js";

type CryptoKey = webcrypto.CryptoKey;

export const SIGNING_ALG = "ES256";
/** The longest lifetime of any token this server mints; a retired key stays valid this long. */
export const MAX_TOKEN_LIFETIME_SECONDS = 24 * 3600;
const REFRESH_MS = 60_000;
const MISS_REFRESH_MS = 5_000;

export interface SigningKey {
  kid: string;
  alg: string;
  key: CryptoKey;
}

export interface KeyStore {
  /** The key new tokens are signed with. */
  signingKey(): Promise<SigningKey>;
  /** The verification key for a kid, or undefined (after one reload from the database, rate-limited). */
  verificationKey(kid: string): Promise<CryptoKey | undefined>;
  /** The public keys to publish (JWKS). */
  publicJwks(): Promise<{ keys: JWK[] }>;
  /** Generates a new signing key and retires the current one. Returns the new kid. */
  rotate(): Promise<string>;
}

async function generate(db: Db): Promise<string> {
  const { privateKey, publicKey } = await generateKeyPair(SIGNING_ALG, { extractable: true });
  const kid = randomBytes(12).toString("base64url");
  const privateJwk = { ...(await exportJWK(privateKey)), kid, alg: SIGNING_ALG };
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg: SIGNING_ALG, use: "sig" };
  await db.insert(signingKeys).values({ kid, alg: SIGNING_ALG, privateJwk, publicJwk });
  return kid;
}

interface Loaded {
  signing: SigningKey;
  verify: Map<string, CryptoKey>;
  jwks: JWK[];
  at: number;
}

/** The channel the signing-key trigger notifies (drizzle/0008). */
export const KEYS_CHANNEL = "apiserver_keys";

export interface KeyStoreOptions {
  /**
   * The database's notification subscription (Database.listen): keys are reloaded as soon as any server
   * adds, retires or removes one. Without it, they are reloaded every minute (and on an unknown kid).
   */
  subscribe?: Subscribe;
}

export async function createKeyStore(db: Db, opts: KeyStoreOptions = {}): Promise<KeyStore> {
  const load = async (): Promise<Loaded> => {
    const rows = await db
      .select()
      .from(signingKeys)
      .where(or(isNull(signingKeys.retireTime), sql`${signingKeys.retireTime} > now() - make_interval(secs => ${MAX_TOKEN_LIFETIME_SECONDS})`))
      .orderBy(desc(signingKeys.createTime), desc(signingKeys.kid));
    const active = rows.find((r) => r.retireTime === null);
    if (!active) throw new Error("no active signing key");
    const verify = new Map<string, CryptoKey>();
    for (const r of rows) verify.set(r.kid, (await importJWK(r.publicJwk as JWK, r.alg)) as CryptoKey);
    return {
      signing: { kid: active.kid, alg: active.alg, key: (await importJWK(active.privateJwk as JWK, active.alg)) as CryptoKey },
      verify,
      jwks: rows.map((r) => r.publicJwk as JWK),
      at: Date.now(),
    };
  };

  // First start: create a key unless some replica already has. Racing replicas may each add one; the
  // newest signs and the others simply verify.
  const existing = await db.select({ kid: signingKeys.kid }).from(signingKeys).where(isNull(signingKeys.retireTime)).limit(1);
  if (existing.length === 0) await generate(db);

  let current = await load();
  let reloading: Promise<Loaded> | undefined;
  const reload = (): Promise<Loaded> =>
    (reloading ??= load()
      .then((l) => (current = l))
      .finally(() => (reloading = undefined)));
  const fresh = async (): Promise<Loaded> => (Date.now() - current.at > REFRESH_MS ? reload() : current);
  // A change notified while a load runs may not be in what that load read: load again after it.
  const changed = (): void => {
    (reloading ? reloading.catch(() => undefined).then(reload) : reload()).catch((err: unknown) =>
      log.warn("signing keys: reload after a change failed", { err }),
    );
  };
  await opts.subscribe?.(KEYS_CHANNEL, changed, changed).catch((err: unknown) => {
    log.warn("signing keys: cannot listen for changes; reloading them every minute", { err });
  });

  return {
    async signingKey() {
      return (await fresh()).signing;
    },
    async verificationKey(kid) {
      const l = await fresh();
      const key = l.verify.get(kid);
      if (key || Date.now() - l.at < MISS_REFRESH_MS) return key;
      return (await reload()).verify.get(kid);
    },
    async publicJwks() {
      return { keys: (await fresh()).jwks };
    },
    async rotate() {
      const kid = await db.transaction(async (tx) => {
        await tx.update(signingKeys).set({ retireTime: sql`now()` }).where(isNull(signingKeys.retireTime));
        return generate(tx as unknown as Db);
      });
      await pruneRetiredKeys(db);
      await reload();
      return kid;
    },
  };
}

/** Deletes keys retired for longer than any token lifetime (housekeeping). */
export async function pruneRetiredKeys(db: Db): Promise<void> {
  await db.delete(signingKeys).where(lt(signingKeys.retireTime, sql`now() - make_interval(secs => ${MAX_TOKEN_LIFETIME_SECONDS})`));
}
