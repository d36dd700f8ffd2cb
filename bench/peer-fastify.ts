// The REST peer: a Fastify server answering `GET /registry/v2/tags?uidp.children_of=<repo>&order_by=uid&page_size=50`
// and `GET /registry/v2/repos/{uid}` with the JSON this server answers (proto3 JSON, default values
// emitted), from the same tables and the same SQL (peer-reads.ts). Serialized as a Fastify user would:
// response schemas compiled by fast-json-stringify. Its own process; prints {"port": N} when listening.
//   tsx bench/peer-fastify.ts '{"databaseUrl": ..., "issuer": ..., "jwksUrl": ...}'
import Fastify, { type FastifyReply } from "fastify";
import { createPeerReads, PeerError, timestampJson, type PeerConfig, type RepoRow, type TagRow } from "./peer-reads.js";

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

await app.listen({ host: "127.0.0.1", port: 0 });
const address = app.server.address();
process.stdout.write(JSON.stringify({ port: typeof address === "object" && address ? address.port : 0 }) + "\n");
process.on("SIGTERM", () => void app.close().then(() => reads.close()).then(() => process.exit(0)));
