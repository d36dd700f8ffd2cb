// The registry's hot calls, and the IAM ones (GetGroup, a hydrated ListRoleBindings page), as load targets on
// a seeded scratch database: what the profile and ab benchmarks measure (the registry and IAM benchmarks
// build their own, beside their baselines and peers).
import type postgres from "postgres";
import { GetGroupRequestSchema } from "../gen/chainguard/platform/iam/v2/groups_pb.js";
import { ListRoleBindingsRequestSchema } from "../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import { GetRepoRequestSchema } from "../gen/chainguard/platform/registry/v2/repos_pb.js";
import { ListTagsRequestSchema } from "../gen/chainguard/platform/registry/v2/tags_pb.js";
import type { openPostgres } from "../src/db/client.js";
import { managedRole } from "../src/iam/managed-roles.js";
import { createKeyStore, mintToken } from "../src/kernel/auth/index.js";
import { grpcMessageSender, grpcSender, http1Sender, type Send } from "./load.js";
import { BENCH_ISSUER, seed } from "./registry.js";

export { BENCH_ISSUER };
const PAGE = 50;
/** Identities bound as viewers in the organization, for a full ListRoleBindings page. */
const BOUND = 200;

/** A named call: given the port of a server, a sender of that call. */
export type Target = [name: string, sender: (port: number) => () => Send];

export interface RegistryCalls {
  /** The bearer token's header, of an identity that may list the repo's tags. */
  auth: { authorization: string };
  /** Ping over gRPC; ListTags page 1, GetRepo, GetGroup and a ListRoleBindings page over gRPC and REST. */
  targets: Target[];
}

/** Seeds `tags` tags in one repo and mints a token that may read them; the calls that read them. */
export async function seedRegistryCalls(sqlc: postgres.Sql, database: Awaited<ReturnType<typeof openPostgres>>, tags: number): Promise<RegistryCalls> {
  const seeded = await seed(sqlc, database, { tags, seconds: 0, concurrency: 0, keepIndexes: false });
  const keys = await createKeyStore(database.db);
  const { token } = await mintToken(keys, { issuer: BENCH_ISSUER, subject: seeded.identityUid, audience: BENCH_ISSUER, ttlSeconds: 3600 });
  const auth = { authorization: `Bearer ${token}` };
  const repo = seeded.repoUid;
  const org = seeded.org;
  await sqlc`
    insert into identities (uid, parent_uid, name, relationship, relationship_type, issuer, subject)
    select ${org} || '/' || lpad(to_hex(i), 16, '0'), ${org}, 'robot ' || i,
           jsonb_build_object('claimMatch', jsonb_build_object('issuer', 'https://ci.invalid', 'subject', 'robot-' || i)),
           1, 'https://ci.invalid', 'robot-' || i
    from generate_series(1, ${BOUND}) i`;
  await sqlc`
    insert into role_bindings (uid, group_uid, identity_uid, role_uid)
    select ${org} || '/' || lpad(to_hex(1000000 + i), 16, '0'), ${org}, ${org} || '/' || lpad(to_hex(i), 16, '0'), ${managedRole("viewer").uid}
    from generate_series(1, ${BOUND}) i`;
  await sqlc`analyze role_bindings, identities`;
  const bindingsRequest = { uidp: { descendantsOf: org }, pageSize: PAGE };
  const listRequest = { uidp: { childrenOf: repo }, orderBy: "uid", pageSize: PAGE };
  return {
    auth,
    targets: [
      ["Ping (gRPC)", (port) => grpcSender(port, "/chainguard.platform.ping.v2.PingService/Ping")],
      ["ListTags page 1 (gRPC)", (port) => grpcMessageSender(port, "/chainguard.platform.registry.v2.TagsService/ListTags", ListTagsRequestSchema, listRequest, auth)],
      ["ListTags page 1 (REST)", (port) => http1Sender(port, "GET", `/registry/v2/tags?uidp.children_of=${encodeURIComponent(repo)}&order_by=uid&page_size=${PAGE}`, undefined, auth)],
      ["GetRepo (gRPC)", (port) => grpcMessageSender(port, "/chainguard.platform.registry.v2.ReposService/GetRepo", GetRepoRequestSchema, { uid: repo }, auth)],
      ["GetRepo (REST)", (port) => http1Sender(port, "GET", `/registry/v2/repos/${repo}`, undefined, auth)],
      ["GetGroup (gRPC)", (port) => grpcMessageSender(port, "/chainguard.platform.iam.v2.GroupsService/GetGroup", GetGroupRequestSchema, { uid: org }, auth)],
      ["GetGroup (REST)", (port) => http1Sender(port, "GET", `/iam/v2/groups/${org}`, undefined, auth)],
      [
        "ListRoleBindings page (gRPC)",
        (port) => grpcMessageSender(port, "/chainguard.platform.iam.v2.RoleBindingsService/ListRoleBindings", ListRoleBindingsRequestSchema, bindingsRequest, auth),
      ],
      ["ListRoleBindings page (REST)", (port) => http1Sender(port, "GET", `/iam/v2/roleBindings?uidp.descendants_of=${org}&page_size=${PAGE}`, undefined, auth)],
    ],
  };
}
