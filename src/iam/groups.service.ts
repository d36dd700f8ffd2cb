// GroupsService: the group tree. A root group is an organization; only root-level identities (people) may
// create one, and they become its owner. Scoped methods (Get, Update, Delete) are authorized by the auth
// interceptor before they run; CreateGroup and ListGroups are unscoped and check or filter here.
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  GroupSchema,
  GroupsService,
  ListGroupsResponseSchema,
  LookupGroupResponseSchema,
} from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { accessOf, listScopesOf, requireRuleAt, requireUnrestricted } from "../kernel/auth/index.js";
import { invalidArgument, notFound, permissionDenied, throwIfAny, under } from "../kernel/errors/index.js";
import { defineListSpec, pageFields } from "../kernel/list/index.js";
import { storeFactory } from "../kernel/unit-of-work.js";
import { defineUpdate, updateUnderLock } from "../kernel/update.js";
import { isValidUid } from "../kernel/uidp.js";
import { bindService, type ServiceBinding } from "../kernel/module.js";
import type { IamDeps } from "./deps.js";
import { groupAccessMethods } from "./group-access.service.js";
import { groupFields, toGroup } from "./groups.mapper.js";
import { createGroupStore } from "./groups.store.js";
import { groupViolations, parentDepthViolations } from "./validate.js";

export const groupList = defineListSpec({
  name: "iam.v2.ListGroups",
  message: GroupSchema,
  orderBy: ["name", "create_time", "update_time"],
  defaultOrder: "uid",
});

const groupUpdate = defineUpdate({ schema: GroupSchema, field: "group", toMessage: toGroup, toFields: groupFields, check: groupViolations });

export function groupsBindings(deps: IamDeps): ServiceBinding[] {
  const groups = storeFactory(deps.db, createGroupStore);

  const impl: ServiceImpl<typeof GroupsService> = {
    async getGroup(req, ctx) {
      return toGroup(await groups(ctx).get(req.uid));
    },

    async listGroups(req, ctx) {
      const scopes = await listScopesOf(ctx);
      const page = await groups(ctx).list(deps.lists.plan(req, groupList, scopes), { scopes, uidp: req.uidp, name: req.name });
      return create(ListGroupsResponseSchema, { groups: page.rows.map(toGroup), ...pageFields(page) });
    },

    async createGroup(req, ctx) {
      const access = accessOf(ctx);
      const group = req.group ?? create(GroupSchema);
      if (req.parent !== "") {
        if (!isValidUid(req.parent)) throw invalidArgument({ field: "parent", description: "is not a valid group uid" });
        // Authorization before existence: the capability on the parent is checked before it is looked up.
        await requireRuleAt(ctx, req.parent);
        throwIfAny([...parentDepthViolations(req.parent), ...under("group", groupViolations(group))]);
        return toGroup(await groups(ctx).create(req.parent, groupFields(group)));
      }
      requireUnrestricted(access.principal, "creating an organization");
      if (access.principal.homeGroup !== undefined) {
        throw permissionDenied(
          "Permission denied: only a root-level identity may create an organization (an identity created under a group is confined to it); name a parent group to create a sub-group",
        );
      }
      throwIfAny(under("group", groupViolations(group)));
      return toGroup(await groups(ctx).createOrganization(groupFields(group), access.principal.identityUid));
    },

    async updateGroup(req, ctx) {
      return toGroup(await updateUnderLock(groups(ctx), req.group?.uid ?? "", req.group, req.updateMask, groupUpdate));
    },

    async deleteGroup(req, ctx) {
      await groups(ctx).remove(req.uid);
      return {};
    },

    async lookupGroup(_req, ctx) {
      // The verified organization named after the caller's email domain. The email is the person's verified
      // one (a root-level identity's; an identity created under a group is confined to it). Every other case
      // (not a person, no verified email, no such organization, or one not verified) is the same NOT_FOUND.
      const { principal } = accessOf(ctx);
      const row = principal.homeGroup === undefined ? await groups(ctx).verifiedOrganizationOf(principal.identityUid) : undefined;
      if (!row) throw notFound(GroupSchema.typeName, "", "No verified organization is named after the domain of the caller's verified email");
      return create(LookupGroupResponseSchema, { group: toGroup(row) });
    },

    // RequestGroupAccess and CheckEligibility: group-access.service.ts.
    ...groupAccessMethods(deps),
  };

  return [bindService(GroupsService, impl)];
}
