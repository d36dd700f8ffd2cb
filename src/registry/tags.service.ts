// TagsService: tags point a name in a repo at a manifest digest. Create, Get and Delete are authorized by the
// auth interceptor before they run, from the group in the request's uid (CreateTag: its parent, the repo
// uid); ListTags is unscoped and filters to the caller's visible scopes.
//
// Decisions:
// - CreateTag is an upsert on (repo, name), through the same upsertTag the OCI import uses: creating a tag
//   that exists moves it (digest, deprecated, bundles) and keeps its uid and create_time; update_time moves
//   whenever something changed. The repo must exist (NOT_FOUND naming it).
// - A tag name follows the OCI tag grammar; a digest is `sha256:` + 64 lowercase hex. Both are checked before
//   anything is read, as INVALID_ARGUMENT on `name` / `digest`. ListTags checks its digest filter the same way.
// - ListTags hides referrer (sha256-<hex>[.sig|.att|...]), date (...-20yymmdd) and epoch (...-r<N>) tags
//   unless include_referrers / include_dates / include_epochs say otherwise. There is no filter on
//   deprecated (clients filter). Default order: name.
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { ListTagsResponseSchema, TagSchema, TagsService, type ListTagsRequest } from "../../gen/chainguard/platform/registry/v2/tags_pb.js";
import { TagKind } from "../db/schema/index.js";
import { listScopesOf } from "../kernel/auth/index.js";
import { throwIfAny, type FieldViolation, under } from "../kernel/errors/index.js";
import { defineListSpec, pageFields } from "../kernel/list/index.js";
import { storeFactory } from "../kernel/unit-of-work.js";
import { bindService, type StoreDeps, type ServiceBinding } from "../kernel/module.js";
import { digestViolations, instantText, tagViolations, tagWrite, toTag } from "./tags.mapper.js";
import { createTagStore, type TagListFilter } from "./tags.store.js";

export const tagList = defineListSpec({
  name: "registry.v2.ListTags",
  message: TagSchema,
  orderBy: ["name", "create_time", "update_time"],
  defaultOrder: "name",
});

/** The tag kinds a ListTags request lists: regular tags always, the others when asked. */
export function kindsOf(req: Pick<ListTagsRequest, "includeReferrers" | "includeDates" | "includeEpochs">): number[] {
  const kinds: number[] = [TagKind.regular];
  if (req.includeReferrers) kinds.push(TagKind.referrer);
  if (req.includeDates) kinds.push(TagKind.date);
  if (req.includeEpochs) kinds.push(TagKind.epoch);
  return kinds;
}

/** The filter fields of a ListTags request (without the caller's scopes), validated. */
export function listFilterOf(req: ListTagsRequest): Omit<TagListFilter, "scopes"> {
  const violations: FieldViolation[] = [];
  if (req.digest) violations.push(...digestViolations(req.digest));
  let updatedSince: string | undefined;
  if (req.updatedSince) {
    updatedSince = instantText(req.updatedSince);
    if (updatedSince === undefined) violations.push({ field: "updated_since", description: "must be a timestamp between years 1 and 9999" });
  }
  throwIfAny(violations);
  return { uidp: req.uidp, name: req.name, digest: req.digest, updatedSince, kinds: kindsOf(req) };
}

export function tagsBindings(deps: StoreDeps): ServiceBinding[] {
  const tags = storeFactory(deps.db, createTagStore);

  const impl: ServiceImpl<typeof TagsService> = {
    async getTag(req, ctx) {
      return toTag(await tags(ctx).get(req.uid));
    },

    async listTags(req, ctx) {
      const filter = listFilterOf(req);
      const scopes = await listScopesOf(ctx);
      const page = await tags(ctx).list(deps.lists.plan(req, tagList, scopes), { scopes, ...filter });
      return create(ListTagsResponseSchema, { tags: page.rows.map(toTag), ...pageFields(page) });
    },

    async createTag(req, ctx) {
      const tag = req.tag ?? create(TagSchema);
      throwIfAny(under("tag", tagViolations(tag)));
      return toTag(await tags(ctx).upsert(tagWrite(req.parent, tag)));
    },

    async deleteTag(req, ctx) {
      await tags(ctx).remove(req.uid);
      return {};
    },
  };

  return [bindService(TagsService, impl)];
}
