// The registry's hot calls as load targets, on a seeded scratch database: what the profile and ab benchmarks
// measure (the registry benchmark builds its own, beside its baselines and peers).
import type postgres from "postgres";
import { GetRepoRequestSchema } from "../gen/chainguard/platform/registry/v2/repos_pb.js";
import { ListTagsRequestSchema } from "../gen/chainguard/platform/registry/v2/tags_pb.js";
import type { openPostgres } from "../src/db/client.js";
import { createKeyStore, mintToken } from "../src/kernel/auth/index.js";
import { grpcMessageSender, grpcSender, http1Sender, type Send } from "./load.js";
import { BENCH_ISSUER, seed } from "./registry.js";

export { BENCH_ISSUER };
const PAGE = 50;

/** A named call: given the port of a server, a sender of that call. */
export type Target = [name: string, sender: (port: number) => () => Send];

export interface RegistryCalls {
  /** The bearer token's header, of an identity that may list the repo's tags. */
  auth: { authorization: string };
  /** Ping over gRPC; ListTags page 1 and GetRepo over gRPC and REST. */
  targets: Target[];
}

/** Seeds `tags` tags in one repo and mints a token that may read them; the calls that read them. */
export async function seedRegistryCalls(sqlc: postgres.Sql, database: Awaited<ReturnType<typeof openPostgres>>, tags: number): Promise<RegistryCalls> {
  const seeded = await seed(sqlc, database, { tags, seconds: 0, concurrency: 0, keepIndexes: false });
  const keys = await createKeyStore(database.db);
  const { token } = await mintToken(keys, { issuer: BENCH_ISSUER, subject: seeded.identityUid, audience: BENCH_ISSUER, ttlSeconds: 3600 });
  const auth = { authorization: `Bearer ${token}` };
  const repo = seeded.repoUid;
  const listRequest = { uidp: { childrenOf: repo }, orderBy: "uid", pageSize: PAGE };
  return {
    auth,
    targets: [
      ["Ping (gRPC)", (port) => grpcSender(port, "/chainguard.platform.ping.v2.PingService/Ping")],
      ["ListTags page 1 (gRPC)", (port) => grpcMessageSender(port, "/chainguard.platform.registry.v2.TagsService/ListTags", ListTagsRequestSchema, listRequest, auth)],
      ["ListTags page 1 (REST)", (port) => http1Sender(port, "GET", `/registry/v2/tags?uidp.children_of=${encodeURIComponent(repo)}&order_by=uid&page_size=${PAGE}`, undefined, auth)],
      ["GetRepo (gRPC)", (port) => grpcMessageSender(port, "/chainguard.platform.registry.v2.ReposService/GetRepo", GetRepoRequestSchema, { uid: repo }, auth)],
      ["GetRepo (REST)", (port) => http1Sender(port, "GET", `/registry/v2/repos/${repo}`, undefined, auth)],
    ],
  };
}
