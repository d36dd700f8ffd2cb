// The REST peer: a Fastify server answering `GET /registry/v2/tags?uidp.children_of=<repo>&order_by=uid&page_size=50`,
// `GET /registry/v2/repos/{uid}`, `GET /iam/v2/groups/{uid}` and
// `GET /iam/v2/roleBindings?uidp.descendants_of=<group>&page_size=50` with the JSON this server answers (proto3 JSON, default values
// emitted), from the same tables and the same SQL (peer-reads.ts). Serialized as a Fastify user would:
// response schemas compiled by fast-json-stringify. Its own process; prints {"port": N} when listening.
//   tsx bench/peer-fastify.ts '{"databaseUrl": ..., "issuer": ..., "jwksUrl": ...}'
import Fastify, { type FastifyReply } from "fastify";
import { createPeerReads, PeerError, timestampJson, type BindingRow, type GroupRow, type PeerConfig, type RepoRow, type TagRow } from "./peer-reads.js";

const CATALOG_TIERS = ["CATALOG_TIER_UNSPECIFIED", "CATALOG_TIER_APPLICATION", "CATALOG_TIER_BASE", "CATALOG_TIER_FIPS", "CATALOG_TIER_AI", "CATALOG_TIER_DEVTOOLS", "CATALOG_TIER_COMMERCIAL"];
const strings = { type: "array", items: { type: "string" } } as const;
const tagSchema = {
  type: "object",
  properties: {
    uid: { type: "string" },
    name: { type: "string" },
    digest: { type: "string" },
    updateTime: { type: "string" },
    deprecated: { type: "boolean" },
    bundles: strings,
    createTime: { type: "string" },
  },
} as const;
const listTagsSchema = {
  type: "object",
  properties: { tags: { type: "array", items: tagSchema }, nextPageToken: { type: "string" }, totalCount: { type: "string" }, skipped: { type: "integer" } },
} as const;
const repoSchema = {
  type: "object",
  properties: {
    uid: { type: "string" },
    name: { type: "string" },
    description: { type: "string" },
    catalogTier: { type: "string" },
    bundles: strings,
    aliases: strings,
    activeTags: strings,
    sync_config: { type: "object", additionalProperties: true },
    customOverlay: { type: "object", additionalProperties: true },
    createTime: { type: "string" },
    updateTime: { type: "string" },
  },
} as const;

const ORG_KINDS = ["ORG_KIND_UNSPECIFIED", "ORG_KIND_STARTER", "ORG_KIND_CUSTOMER", "ORG_KIND_DEV", "ORG_KIND_INFRA", "ORG_KIND_AWS_MARKETPLACE"];
const ORG_STATUSES = ["ORG_STATUS_UNSPECIFIED", "ORG_STATUS_INITIALIZING", "ORG_STATUS_READY", "ORG_STATUS_SUSPENDED"];
const groupSchema = {
  type: "object",
  properties: {
    uid: { type: "string" },
    name: { type: "string" },
    description: { type: "string" },
    resourceLimits: { type: "object", additionalProperties: { type: "integer" } },
    verified: { type: "boolean" },
    createTime: { type: "string" },
    updateTime: { type: "string" },
    kind: { type: "string" },
    status: { type: "string" },
  },
} as const;
const named = { type: "object", properties: { uid: { type: "string" }, name: { type: "string" }, description: { type: "string" } } } as const;
const bindingSchema = {
  type: "object",
  properties: {
    uid: { type: "string" },
    identity: {
      type: "object",
      properties: {
        uid: { type: "string" },
        name: { type: "string" },
        description: { type: "string" },
        subject: { type: "string" },
        issuer: { type: "string" },
        email: { type: "string" },
      },
    },
    group: named,
    role: named,
    createTime: { type: "string" },
    identityUid: { type: "string" },
    roleUid: { type: "string" },
    updateTime: { type: "string" },
  },
} as const;
const listBindingsSchema = {
  type: "object",
  properties: { roleBindings: { type: "array", items: bindingSchema }, nextPageToken: { type: "string" }, totalCount: { type: "string" }, skipped: { type: "integer" } },
} as const;

const groupJson = (g: GroupRow) => ({
  uid: g.uid,
  name: g.name,
  description: g.description,
  resourceLimits: {},
  verified: g.verified,
  createTime: timestampJson(g.create_time),
  updateTime: timestampJson(g.update_time),
  kind: ORG_KINDS[g.kind] ?? g.kind,
  status: ORG_STATUSES[g.status] ?? g.status,
});

const bindingJson = (b: BindingRow) => ({
  uid: b.uid,
  identity: {
    uid: b.identity_uid,
    name: b.identity_name,
    description: b.identity_description,
    subject: b.identity_subject ?? "",
    issuer: b.identity_issuer ?? "",
    email: b.identity_email,
  },
  group: { uid: b.group_uid, name: b.group_name, description: b.group_description },
  role: { uid: b.role_uid, name: b.role_name, description: b.role_description },
  createTime: timestampJson(b.create_time),
  identityUid: b.identity_uid,
  roleUid: b.role_uid,
  updateTime: timestampJson(b.update_time),
});

const tagJson = (t: TagRow) => ({
  uid: t.uid,
  name: t.name,
  digest: t.digest,
  updateTime: timestampJson(t.update_time),
  deprecated: t.deprecated,
  bundles: t.bundles,
  createTime: timestampJson(t.create_time),
});

const repoJson = (r: RepoRow) => ({
  uid: r.uid,
  name: r.name,
  description: r.description,
  catalogTier: CATALOG_TIERS[r.catalog_tier] ?? String(r.catalog_tier),
  bundles: r.bundles,
  aliases: r.aliases,
  activeTags: r.active_tags,
  sync_config: r.sync_config ?? undefined,
  customOverlay: r.custom_overlay ?? undefined,
  createTime: timestampJson(r.create_time),
  updateTime: timestampJson(r.update_time),
});

const cfg = JSON.parse(process.argv[2]!) as PeerConfig;
const reads = createPeerReads(cfg);
const app = Fastify({ logger: false });

const fail = (reply: FastifyReply, err: unknown) => {
  if (err instanceof PeerError) return reply.code(err.status).send({ code: err.status, message: err.message });
  throw err;
};

type Query = Record<string, string | undefined>;
app.get<{ Querystring: Query }>("/registry/v2/tags", { schema: { response: { 200: listTagsSchema } } }, async (req, reply) => {
  const q = req.query;
  try {
    const identity = await reads.caller(req.headers.authorization);
    const page = await reads.listTags(identity, {
      repo: q["uidp.children_of"] ?? q["uidp.childrenOf"] ?? "",
      pageSize: Number(q.page_size ?? q.pageSize ?? 0),
      pageToken: q.page_token ?? q.pageToken ?? "",
      orderBy: q.order_by ?? q.orderBy ?? "",
    });
    return { tags: page.rows.map(tagJson), nextPageToken: page.nextPageToken, totalCount: page.totalCount, skipped: 0 };
  } catch (err) {
    return fail(reply, err);
  }
});

app.get<{ Params: { "*": string } }>("/registry/v2/repos/*", { schema: { response: { 200: repoSchema } } }, async (req, reply) => {
  try {
    const identity = await reads.caller(req.headers.authorization);
    return repoJson(await reads.getRepo(identity, req.params["*"]));
  } catch (err) {
    return fail(reply, err);
  }
});

app.get<{ Params: { "*": string } }>("/iam/v2/groups/*", { schema: { response: { 200: groupSchema } } }, async (req, reply) => {
  try {
    const identity = await reads.caller(req.headers.authorization);
    return groupJson(await reads.getGroup(identity, req.params["*"]));
  } catch (err) {
    return fail(reply, err);
  }
});

app.get<{ Querystring: Query }>("/iam/v2/roleBindings", { schema: { response: { 200: listBindingsSchema } } }, async (req, reply) => {
  const q = req.query;
  try {
    const identity = await reads.caller(req.headers.authorization);
    const page = await reads.listRoleBindings(identity, {
      under: q["uidp.descendants_of"] ?? q["uidp.descendantsOf"] ?? "",
      pageSize: Number(q.page_size ?? q.pageSize ?? 0),
      pageToken: q.page_token ?? q.pageToken ?? "",
      orderBy: q.order_by ?? q.orderBy ?? "",
    });
    return { roleBindings: page.rows.map(bindingJson), nextPageToken: page.nextPageToken, totalCount: page.totalCount, skipped: 0 };
  } catch (err) {
    return fail(reply, err);
  }
});

await app.listen({ host: "127.0.0.1", port: 0 });
const address = app.server.address();
process.stdout.write(JSON.stringify({ port: typeof address === "object" && address ? address.port : 0 }) + "\n");
process.on("SIGTERM", () => void app.close().then(() => reads.close()).then(() => process.exit(0)));
