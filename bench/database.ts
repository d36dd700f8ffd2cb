// The benchmarks' PostgreSQL: a scratch database created for one run and dropped after it, and an organization
// owned by a caller whose token the benchmark mints with the database's own signing keys.
import { randomBytes } from "node:crypto";
import postgres from "postgres";
import type { Db } from "../src/db/client.js";
import { bootstrap } from "../src/iam/bootstrap.js";
import { createKeyStore, mintToken } from "../src/kernel/auth/index.js";
import { say } from "./load.js";

const DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/postgres";

/**
 * Creates a database named `<prefix>_<pid>_<random>` on the server DATABASE_URL names (default
 * postgres://postgres@127.0.0.1:5432/postgres), runs `body` with its URL, and drops it (with force) after,
 * saying so on stderr.
 */
export async function withScratchDatabase<T>(prefix: string, body: (url: string, name: string) => Promise<T>): Promise<T> {
  const url = process.env.DATABASE_URL || DEFAULT_URL;
  const admin = postgres(url, { max: 1, onnotice: () => {} });
  const name = `${prefix}_${process.pid}_${randomBytes(3).toString("hex")}`;
  await admin.unsafe(`create database ${name}`);
  const target = new URL(url);
  target.pathname = `/${name}`;
  try {
    return await body(target.toString(), name);
  } finally {
    await admin.unsafe(`drop database if exists ${name} with (force)`);
    await admin.end();
    say("dropped the scratch database");
  }
}

/**
 * An organization bootstrapped as `npm run bootstrap` makes one, and an access token of `issuer` (the server's
 * ISSUER_URL) for its owner, as the authorization header of a call.
 */
export async function ownedOrganization(db: Db, issuer: string, ttlSeconds: number): Promise<{ org: string; owner: string; auth: Record<string, string> }> {
  const { group: org, identity: owner } = await bootstrap(db, { issuer: "https://idp.invalid", subject: "bench", organization: "bench" });
  const keys = await createKeyStore(db);
  const { token } = await mintToken(keys, { issuer, subject: owner, audience: issuer, ttlSeconds });
  return { org, owner, auth: { authorization: `Bearer ${token}` } };
}
