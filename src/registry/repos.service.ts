// ReposService: container image repositories inside a group, and their readme. Scoped methods (Create, Get,
// Update, Delete, and the readme pair) are authorized by the auth interceptor before they run, from the
// group in the request's uid (or parent); ListRepos is unscoped and filters to the caller's visible scopes.
//
// Decisions:
// - A repo name is a registry repository path (lowercase components joined by "/", see repos.validate.ts),
//   unique within its group (ALREADY_EXISTS naming the repo that has it). Renaming is allowed: name is
//   REQUIRED, not IMMUTABLE, in the contract.
// - UpdateRepo follows the PATCH rules of the field-mask kernel; OUTPUT_ONLY fields (uid, times, the
//   server-managed sync_config fields) are never taken from a request, on create either. A change moves
//   update_time; a request that changes nothing leaves the repo untouched.
// - The readme is Markdown of at most 1 MiB (UTF-8). UpdateRepoReadme follows the same PATCH rules on
//   RepoReadme (no mask and empty content is no change; mask `content` or `*` with empty content clears it),
//   and a change moves the repo's update_time. It needs CAP_REPO_UPDATE and CAP_REPO_INTERNAL_ADMIN.
// - ListRepos defaults to name order; name, create_time, update_time and uid may be ordered by.
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { ListReposResponseSchema, RepoReadmeSchema, RepoSchema, ReposService } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { listScopesOf } from "../kernel/auth/index.js";
import { throwIfAny, under } from "../kernel/errors/index.js";
import { defineListSpec, pageFields } from "../kernel/list/index.js";
import { storeFactory } from "../kernel/unit-of-work.js";
import { defineUpdate, updateUnderLock } from "../kernel/update.js";
import { bindService, type StoreDeps, type ServiceBinding } from "../kernel/module.js";
import { repoFields, toRepo, toRepoReadme, writableRepo } from "./repos.mapper.js";
import { createRepoStore } from "./repos.store.js";
import { readmeViolations, repoViolations } from "./repos.validate.js";

export const repoList = defineListSpec({
  name: "registry.v2.ListRepos",
  message: RepoSchema,
  orderBy: ["name", "create_time", "update_time"],
  defaultOrder: "name",
});

const repoUpdate = defineUpdate({ schema: RepoSchema, field: "repo", toMessage: toRepo, toFields: repoFields, check: repoViolations });

export function reposBindings(deps: StoreDeps): ServiceBinding[] {
  const repos = storeFactory(deps.db, createRepoStore);

  const impl: ServiceImpl<typeof ReposService> = {
    async createRepo(req, ctx) {
      const repo = writableRepo(req.repo ?? create(RepoSchema));
      throwIfAny(under("repo", repoViolations(repo)));
      return toRepo(await repos(ctx).create(req.parent, repoFields(repo)));
    },

    async getRepo(req, ctx) {
      return toRepo(await repos(ctx).get(req.uid));
    },

    async listRepos(req, ctx) {
      const scopes = await listScopesOf(ctx);
      const page = await repos(ctx).list(deps.lists.plan(req, repoList, scopes), { scopes, uidp: req.uidp, name: req.name ?? "" });
      return create(ListReposResponseSchema, { repos: page.rows.map(toRepo), ...pageFields(page) });
    },

    async updateRepo(req, ctx) {
      return toRepo(await updateUnderLock(repos(ctx), req.repo?.uid ?? "", req.repo, req.updateMask, repoUpdate));
    },

    async deleteRepo(req, ctx) {
      await repos(ctx).remove(req.uid);
      return {};
    },

    async getRepoReadme(req, ctx) {
      return toRepoReadme(await repos(ctx).readmes.get(req.uid));
    },

    async updateRepoReadme(req, ctx) {
      const patch = req.repoReadme ?? create(RepoReadmeSchema);
      // Checked before the row is locked: a too-large readme never reaches the database.
      throwIfAny(under("repo_readme", readmeViolations(patch.content)));
      const row = await updateUnderLock(repos(ctx).readmes, patch.uid, patch, req.updateMask, {
        schema: RepoReadmeSchema,
        field: "repo_readme",
        toMessage: toRepoReadme,
        toFields: (next) => next.content,
      });
      return toRepoReadme(row);
    },
  };

  return [bindService(ReposService, impl)];
}
