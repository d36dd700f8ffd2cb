// The gRPC peer: a @grpc/grpc-js server for TagsService.ListTags, ReposService.GetRepo, GroupsService.GetGroup
// and RoleBindingsService.ListRoleBindings, loaded from the
// same protos with @grpc/proto-loader (protobufjs underneath), answering from the same tables and SQL as the
// REST peer and the server (peer-reads.ts). Its own process; prints {"port": N} when listening.
//   tsx bench/peer-grpc.ts '{"databaseUrl": ..., "issuer": ..., "jwksUrl": ...}'
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { createPeerReads, PeerError, type BindingRow, type GroupRow, type PeerConfig, type RepoRow, type TagRow } from "./peer-reads.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const definition = loadSync(
  ["chainguard/platform/registry/v2/tags.proto", "chainguard/platform/registry/v2/repos.proto", "chainguard/platform/iam/v2/groups.proto", "chainguard/platform/iam/v2/role_bindings.proto"],
  {
  includeDirs: [`${root}proto`, `${root}node_modules/google-proto-files`],
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
  },
);
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const loaded = (grpc.loadPackageDefinition(definition) as any).chainguard.platform;
const registry = loaded.registry.v2;
const iam = loaded.iam.v2;

const status: Record<PeerError["status"], grpc.status> = {
  400: grpc.status.INVALID_ARGUMENT,
  401: grpc.status.UNAUTHENTICATED,
  403: grpc.status.PERMISSION_DENIED,
  404: grpc.status.NOT_FOUND,
};

const timestamp = (d: Date) => {
  const ms = d.getTime();
  const seconds = Math.floor(ms / 1000);
  return { seconds, nanos: (ms - seconds * 1000) * 1_000_000 };
};

const tagOf = (t: TagRow) => ({
  uid: t.uid,
  name: t.name,
  digest: t.digest,
  updateTime: timestamp(t.update_time),
  deprecated: t.deprecated,
  bundles: t.bundles,
  createTime: timestamp(t.create_time),
});

const repoOf = (r: RepoRow) => ({
  uid: r.uid,
  name: r.name,
  description: r.description,
  catalogTier: r.catalog_tier,
  bundles: r.bundles,
  aliases: r.aliases,
  activeTags: r.active_tags,
  // The stored proto3 JSON of these two is not decoded here: the benchmark's repo has neither.
  createTime: timestamp(r.create_time),
  updateTime: timestamp(r.update_time),
});

const groupOf = (g: GroupRow) => ({
  uid: g.uid,
  name: g.name,
  description: g.description,
  verified: g.verified,
  createTime: timestamp(g.create_time),
  updateTime: timestamp(g.update_time),
  kind: g.kind,
  status: g.status,
});

const bindingOf = (b: BindingRow) => ({
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
  createTime: timestamp(b.create_time),
  identityUid: b.identity_uid,
  roleUid: b.role_uid,
  updateTime: timestamp(b.update_time),
});

const cfg = JSON.parse(process.argv[2]!) as PeerConfig;
const reads = createPeerReads(cfg);

/** A unary handler: the caller from the metadata, then the read; PeerErrors as their gRPC status. */
function unary<Req, Res>(run: (identity: string, req: Req) => Promise<Res>): grpc.handleUnaryCall<Req, Res> {
  return (call, callback) => {
    const authorization = call.metadata.get("authorization")[0];
    reads
      .caller(typeof authorization === "string" ? authorization : undefined)
      .then((identity) => run(identity, call.request))
      .then(
        (res) => callback(null, res),
        (err: unknown) => callback(err instanceof PeerError ? { code: status[err.status], details: err.message } : { code: grpc.status.INTERNAL, details: String(err) }),
      );
  };
}

interface ListTagsRequest {
  uidp?: { childrenOf?: string };
  pageSize: number;
  pageToken: string;
  orderBy: string;
}

const server = new grpc.Server();
server.addService(registry.TagsService.service, {
  listTags: unary(async (identity, req: ListTagsRequest) => {
    const page = await reads.listTags(identity, { repo: req.uidp?.childrenOf ?? "", pageSize: req.pageSize, pageToken: req.pageToken, orderBy: req.orderBy });
    return { tags: page.rows.map(tagOf), nextPageToken: page.nextPageToken, totalCount: page.totalCount, skipped: 0 };
  }),
});
server.addService(registry.ReposService.service, {
  getRepo: unary(async (identity, req: { uid: string }) => repoOf(await reads.getRepo(identity, req.uid))),
});

server.addService(iam.GroupsService.service, {
  getGroup: unary(async (identity, req: { uid: string }) => groupOf(await reads.getGroup(identity, req.uid))),
});
server.addService(iam.RoleBindingsService.service, {
  listRoleBindings: unary(async (identity, req: { uidp?: { descendantsOf?: string }; pageSize: number; pageToken: string; orderBy: string }) => {
    const page = await reads.listRoleBindings(identity, { under: req.uidp?.descendantsOf ?? "", pageSize: req.pageSize, pageToken: req.pageToken, orderBy: req.orderBy });
    return { roleBindings: page.rows.map(bindingOf), nextPageToken: page.nextPageToken, totalCount: page.totalCount, skipped: 0 };
  }),
});

const port = await new Promise<number>((resolve, reject) =>
  server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
);
process.stdout.write(JSON.stringify({ port }) + "\n");
process.on("SIGTERM", () => server.tryShutdown(() => void reads.close().then(() => process.exit(0))));
