// What the benchmark's peers (peer-fastify.ts, peer-grpc.ts) share: the reads of ListTags and GetRepo as
// a user would write them with postgres.js and jose, over the tables this server owns. The SQL is the
// server's own (the same keyset statement with the total read from tag_counts in it, the same point
// select), so the peers differ from the server in their stack, not in their queries.
//
// Authentication: a bearer token of the server's issuer, verified with jose against the server's JWKS
// (createRemoteJWKSet: fetched once, kept), ES256, exp/iat/sub required; a verified token is remembered until
// it expires, as the server remembers its own.
// Authorization: the caller's capability on the resource's group, asked of the database in the read's own
// statement (one round trip, where the server answers from grants it remembers): a role binding of the
// caller, whose role holds the capability, on the group or an ancestor of it; a confined identity (one
// created under a group) only within its home group; a deactivated identity nothing.
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { createRemoteJWKSet, jwtVerify } from "jose";
import postgres from "postgres";
import { Capability } from "../gen/capabilities/capabilities_pb.js";

/** The application_name of the peers' pools (their PostgreSQL backends are measured apart from the server's). */
export const PEER_APPLICATION = "bench-peer";

export interface PeerConfig {
  databaseUrl: string;
  /** The server's issuer (the tokens' `iss` and `aud`) and its JWKS URL. */
  issuer: string;
  jwksUrl: string;
}

export interface TagRow {
  uid: string;
  name: string;
  digest: string;
  deprecated: boolean;
  bundles: string[];
  create_time: Date;
  update_time: Date;
}

export interface RepoRow {
  uid: string;
  name: string;
  description: string;
  catalog_tier: number;
  bundles: string[];
  aliases: string[];
  active_tags: string[];
  sync_config: Record<string, unknown> | null;
  custom_overlay: Record<string, unknown> | null;
  create_time: Date;
  update_time: Date;
}

export interface TagsPage {
  rows: TagRow[];
  nextPageToken: string;
  totalCount: string;
}

/** A failure the peers answer with a status: 400, 401, 403, 404. */
export class PeerError extends Error {
  constructor(
    readonly status: 400 | 401 | 403 | 404,
    message: string,
  ) {
    super(message);
  }
}

const MAX_PAGE_SIZE = 200;
const DEFAULT_PAGE_SIZE = 50;

export function createPeerReads(cfg: PeerConfig) {
  const sql = postgres(cfg.databaseUrl, { max: 10, onnotice: () => {}, connection: { application_name: PEER_APPLICATION } });
  const jwks = createRemoteJWKSet(new URL(cfg.jwksUrl));
  const verified = new Map<string, { sub: string; exp: number }>();
  const secret = randomBytes(32);

  /** The identity the bearer token names; 401 when there is none or it does not verify. */
  async function caller(authorization: string | undefined): Promise<string> {
    const token = /^\s*bearer\s+(\S+)\s*$/i.exec(authorization ?? "")?.[1];
    if (!token) throw new PeerError(401, "missing bearer token");
    const known = verified.get(token);
    if (known && known.exp * 1000 > Date.now()) return known.sub;
    try {
      const { payload } = await jwtVerify(token, jwks, {
        issuer: cfg.issuer,
        audience: cfg.issuer,
        algorithms: ["ES256"],
        requiredClaims: ["exp", "iat", "sub"],
        clockTolerance: 30,
      });
      if (verified.size >= 10_000) verified.clear();
      verified.set(token, { sub: payload.sub!, exp: payload.exp! });
      return payload.sub!;
    } catch {
      throw new PeerError(401, "invalid bearer token");
    }
  }

  // Whether identity $2 holds capability $3 on the group or resource uid $1.
  const allowed = (target: string, identity: string, capability: number) => sql`
    exists (
      select 1 from role_bindings b
      join roles r on r.uid = b.role_uid
      join identities i on i.uid = b.identity_uid
      where b.identity_uid = ${identity} and i.active and ${capability}::int = any(r.capabilities)
        and (${target} = b.group_uid or ${target} like b.group_uid || '/%')
        and (i.parent_uid is null or ${target} = i.parent_uid or ${target} like i.parent_uid || '/%'))`;

  /** A signed page token: the keyset position and the total, bound to the repo and the order. */
  const sign = (body: string) => createHmac("sha256", secret).update(body).digest("base64url");
  function mintToken(query: string, last: string, total: string): string {
    const body = Buffer.from(JSON.stringify({ q: query, k: last, n: total, t: Date.now() })).toString("base64url");
    return `${body}.${sign(body)}`;
  }
  function readToken(query: string, token: string): { k: string; n: string } {
    const [body, mac] = token.split(".");
    if (!body || !mac || mac.length !== 43 || !timingSafeEqual(Buffer.from(sign(body)), Buffer.from(mac))) throw new PeerError(400, "invalid page_token");
    const p = JSON.parse(Buffer.from(body, "base64url").toString()) as { q: string; k: string; n: string };
    if (p.q !== query) throw new PeerError(400, "page_token belongs to another query");
    return p;
  }

  return {
    caller,

    /** A page of the repo's regular tags in uid order (order_by "uid"), with the total from tag_counts. */
    async listTags(identity: string, req: { repo: string; pageSize: number; pageToken: string; orderBy: string }): Promise<TagsPage> {
      if (!req.repo) throw new PeerError(400, "uidp.children_of is required");
      if (req.orderBy !== "uid") throw new PeerError(400, "order_by: only uid is supported by this peer");
      if (!Number.isInteger(req.pageSize) || req.pageSize < 0) throw new PeerError(400, "page_size must be a non-negative integer");
      const limit = req.pageSize === 0 ? DEFAULT_PAGE_SIZE : Math.min(req.pageSize, MAX_PAGE_SIZE);
      const query = `${req.repo}\n${req.orderBy}`;
      const cursor = req.pageToken ? readToken(query, req.pageToken) : undefined;
      // The server's statement: the page after the keyset position, its total from the maintained counters on
      // the first page only; here with the caller's capability on the repo in the same statement.
      const ok = allowed(req.repo, identity, Capability.CAP_TAG_LIST);
      const rows = cursor
        ? await sql<TagRow[]>`
            select uid, name, digest, deprecated, bundles, create_time, update_time
            from tags where repo_uid = ${req.repo} and kind = 0 and uid > ${cursor.k} and ${ok}
            order by uid limit ${limit + 1}`
        : await sql<(TagRow & { total: string })[]>`
            select uid, name, digest, deprecated, bundles, create_time, update_time,
                   (select coalesce(sum(count), 0) from tag_counts where repo_uid = ${req.repo} and kind = 0)::text as total
            from tags where repo_uid = ${req.repo} and kind = 0 and uid > '' and ${ok}
            order by uid limit ${limit + 1}`;
      const more = rows.length > limit;
      const kept = more ? rows.slice(0, limit) : rows;
      // No rows: nothing visible (the server answers an empty page with a total of 0), or past the end.
      const total = cursor ? cursor.n : ((rows[0] as { total?: string } | undefined)?.total ?? "0");
      const last = kept[kept.length - 1];
      return { rows: kept, nextPageToken: more && last ? mintToken(query, last.uid, total) : "", totalCount: total };
    },

    /** The repo, 403 when the caller lacks CAP_REPO_LIST on it (whether or not it exists), 404 when missing. */
    async getRepo(identity: string, uid: string): Promise<RepoRow> {
      if (!uid) throw new PeerError(400, "uid is required");
      const [row] = await sql<(RepoRow & { ok: boolean })[]>`
        select ${allowed(uid, identity, Capability.CAP_REPO_LIST)} as ok, r.uid, r.name, r.description, r.catalog_tier, r.bundles,
               r.aliases, r.active_tags, r.sync_config, r.custom_overlay, r.create_time, r.update_time
        from (select 1) as one left join repos r on r.uid = ${uid}`;
      if (!row?.ok) throw new PeerError(403, "permission denied");
      if (row.uid === null) throw new PeerError(404, "repo not found");
      return row;
    },

    close: () => sql.end({ timeout: 5 }),
  };
}

/** RFC 3339 as proto3 JSON writes a Timestamp read at millisecond precision: no fraction when it is zero. */
export function timestampJson(d: Date): string {
  const iso = d.toISOString();
  return iso.endsWith(".000Z") ? `${iso.slice(0, -5)}Z` : iso;
}
