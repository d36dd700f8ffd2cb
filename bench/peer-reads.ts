// What the benchmark's peers (peer-fastify.ts, peer-grpc.ts) share: the reads of ListTags, GetRepo, GetGroup
// and ListRoleBindings as a user would write them with postgres.js and jose, over the tables this server owns.
// The registry's SQL is the server's own (the same keyset statement with the total read from tag_counts in
// it, the same point select), so the peers differ from the server in their stack, not in their queries. The
// role-bindings page is what a careful author writes: the caller's scopes in a CTE, the hydrating joins, a
// keyset page in (create_time, uid) order, its count on the first page in the same statement.
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

export interface GroupRow {
  uid: string;
  name: string;
  description: string;
  verified: boolean;
  kind: number;
  status: number;
  create_time: Date;
  update_time: Date;
}

/** A role binding with its identity, group and role (the hydrated RoleBinding). */
export interface BindingRow {
  uid: string;
  group_uid: string;
  identity_uid: string;
  role_uid: string;
  create_time: Date;
  update_time: Date;
  identity_name: string;
  identity_description: string;
  identity_subject: string | null;
  identity_issuer: string | null;
  identity_email: string;
  group_name: string;
  group_description: string;
  role_name: string;
  role_description: string;
}

export interface BindingsPage {
  rows: BindingRow[];
  nextPageToken: string;
  totalCount: string;
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

  /**
   * The groups where identity $1 holds capability $2 (its bindings' groups; a confined identity's only
   * within its home group): a binding's group is visible when it is one of them or lies beneath one.
   */
  const scopesOf = (identity: string, capability: number) => sql`
    select b.group_uid as scope from role_bindings b
    join roles r on r.uid = b.role_uid
    join identities i on i.uid = b.identity_uid
    where b.identity_uid = ${identity} and i.active and ${capability}::int = any(r.capabilities)
      and (i.parent_uid is null or b.group_uid = i.parent_uid or b.group_uid like i.parent_uid || '/%')`;

  return {
    caller,

    /** The group, 403 when the caller lacks CAP_IAM_GROUPS_LIST on it (whether or not it exists), 404 when missing. */
    async getGroup(identity: string, uid: string): Promise<GroupRow> {
      if (!uid) throw new PeerError(400, "uid is required");
      const [row] = await sql<(GroupRow & { ok: boolean })[]>`
        select ${allowed(uid, identity, Capability.CAP_IAM_GROUPS_LIST)} as ok, g.uid, g.name, g.description, g.verified, g.kind,
               g.status, g.create_time, g.update_time
        from (select 1) as one left join groups g on g.uid = ${uid}`;
      if (!row?.ok) throw new PeerError(403, "permission denied");
      if (row.uid === null) throw new PeerError(404, "group not found");
      return row;
    },

    /**
     * A page of the role bindings beneath a group (uidp.descendants_of) that the caller may list (its
     * CAP_IAM_ROLE_BINDINGS_LIST scopes, read in the same statement), hydrated with their identity, group and
     * role, in (create_time, uid) order; the total on the first page, counted in the same statement.
     */
    async listRoleBindings(identity: string, req: { under: string; pageSize: number; pageToken: string; orderBy: string }): Promise<BindingsPage> {
      if (!req.under) throw new PeerError(400, "uidp.descendants_of is required by this peer");
      if (req.orderBy !== "" && req.orderBy !== "create_time") throw new PeerError(400, "order_by: only create_time is supported by this peer");
      if (!Number.isInteger(req.pageSize) || req.pageSize < 0) throw new PeerError(400, "page_size must be a non-negative integer");
      const limit = req.pageSize === 0 ? DEFAULT_PAGE_SIZE : Math.min(req.pageSize, MAX_PAGE_SIZE);
      const query = `bindings\n${req.under}`;
      const cursor = req.pageToken ? readToken(query, req.pageToken) : undefined;
      // Beneath the group: uid in [<group>/, <group>0), an index range whatever the plan (uids sort as bytes).
      const lo = `${req.under}/`;
      const hi = `${req.under}0`;
      const scopes = scopesOf(identity, Capability.CAP_IAM_ROLE_BINDINGS_LIST);
      const visible = (alias: string) =>
        sql`exists (select 1 from scopes s where ${sql(alias)}.group_uid = s.scope or ${sql(alias)}.group_uid like s.scope || '/%')`;
      const [at, uid] = cursor ? (JSON.parse(cursor.k) as [string, string]) : ["", ""];
      const rows = await sql<(BindingRow & { k: string; total?: string })[]>`
        with scopes as (${scopes})
        select b.uid, b.group_uid, b.identity_uid, b.role_uid, b.create_time, b.update_time, b.create_time::text as k,
               i.name as identity_name, i.description as identity_description, i.subject as identity_subject,
               i.issuer as identity_issuer, i.email as identity_email, g.name as group_name, g.description as group_description,
               r.name as role_name, r.description as role_description
               ${cursor ? sql`` : sql`, (select count(*) from role_bindings c where c.uid >= ${lo} and c.uid < ${hi} and ${visible("c")})::text as total`}
        from role_bindings b
        join identities i on i.uid = b.identity_uid
        join groups g on g.uid = b.group_uid
        join roles r on r.uid = b.role_uid
        where b.uid >= ${lo} and b.uid < ${hi} and ${visible("b")}
          ${cursor ? sql`and (b.create_time, b.uid) > (${at}::timestamptz, ${uid})` : sql``}
        order by b.create_time, b.uid limit ${limit + 1}`;
      const more = rows.length > limit;
      const kept = more ? rows.slice(0, limit) : rows;
      const total = cursor ? cursor.n : (rows[0]?.total ?? "0");
      const last = kept[kept.length - 1];
      return { rows: kept, nextPageToken: more && last ? mintToken(query, JSON.stringify([last.k, last.uid]), total) : "", totalCount: total };
    },

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
