// Requests for access to a group: GroupsService.RequestGroupAccess and CheckEligibility (spread into the
// GroupsService), and the list the group's owners read (apiserver.iam.v1.GroupAccessRequestsService).
//
// Who may ask: an eligible caller, i.e. a root-level identity (a person, as CheckEligibility says; an
// identity created under a group is confined to it and can never use access elsewhere). Any existing
// organization (root group) may be asked for, by its uid: that is the point; a sub-group is NOT_FOUND, as
// an unknown uid is, whoever asks. What this reveals to the asker is only that an organization with that
// uid exists; nothing about it is returned. Uids are random, so this is no directory of groups. A caller who
// already holds a binding on the organization is told so (FAILED_PRECONDITION), which reveals nothing it
// cannot read already.
//
// A request is recorded (group_access_requests) and evented (dev.chainguard.api.iam.group_access.requested.v1,
// subject and group: the group asked for, actor: the requester), so the group's subscribers hear it. A repeat
// for the same group within the window (GROUP_ACCESS_REQUEST_WINDOW_MINUTES) is RESOURCE_EXHAUSTED with a
// RetryInfo. Approving: an owner creates a role binding for the requester on the group; the request is then
// no longer pending (the list computes it from the bindings), so there is nothing else to mark.
import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  GroupAccessRequestSchema,
  GroupAccessRequestsService,
  ListGroupAccessRequestsResponseSchema,
} from "../../gen/apiserver/iam/v1/group_access_requests_pb.js";
import {
  CheckEligibilityResponseSchema,
  GroupSchema,
  RequestGroupAccessResponseSchema,
  type CheckEligibilityRequest,
  type CheckEligibilityResponse,
  type RequestGroupAccessRequest,
  type RequestGroupAccessResponse,
} from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { accessOf, isUnrestricted, requireUnrestricted, type Principal } from "../kernel/auth/index.js";
import { failedPrecondition, invalidArgument, notFound, permissionDenied, resourceExhausted } from "../kernel/errors/index.js";
import { defineListSpec, pageFields } from "../kernel/list/index.js";
import { storeFactory } from "../kernel/unit-of-work.js";
import { isRootUid, isValidUid } from "../kernel/uidp.js";
import { bindService, type ServiceBinding } from "../kernel/module.js";
import type { IamDeps } from "./deps.js";
import { toGroupAccessRequest } from "./group-access.mapper.js";
import { createGroupAccessStore } from "./group-access.store.js";

export const groupAccessRequestList = defineListSpec({
  name: "apiserver.iam.v1.ListGroupAccessRequests",
  message: GroupAccessRequestSchema,
  orderBy: ["create_time", "request_time", "group_uid"],
  defaultOrder: "request_time desc",
});

/**
 * Eligible to request access to a group, and to create an organization: a root-level identity, with a token
 * that is not down-scoped.
 */
const isEligible = (principal: Principal): boolean => principal.homeGroup === undefined && isUnrestricted(principal.restriction);

function humanDuration(ms: number): string {
  const minutes = Math.ceil(ms / 60_000);
  return minutes >= 120 ? `${Math.ceil(minutes / 60)} hours` : `${minutes} minute${minutes === 1 ? "" : "s"}`;
}

/** The two GroupsService methods, for groups.service.ts to spread into its implementation. */
export function groupAccessMethods(deps: IamDeps): {
  requestGroupAccess(req: RequestGroupAccessRequest, ctx: HandlerContext): Promise<RequestGroupAccessResponse>;
  checkEligibility(req: CheckEligibilityRequest, ctx: HandlerContext): CheckEligibilityResponse;
} {
  const requests = storeFactory(deps.db, createGroupAccessStore);
  return {
    checkEligibility(_req, ctx) {
      return create(CheckEligibilityResponseSchema, { eligible: isEligible(accessOf(ctx).principal) });
    },

    async requestGroupAccess(req, ctx) {
      const { principal } = accessOf(ctx);
      if (req.groupUid === "") throw invalidArgument({ field: "group_uid", description: "is required" });
      if (!isValidUid(req.groupUid)) throw invalidArgument({ field: "group_uid", description: "is not a valid group uid" });
      requireUnrestricted(principal, "asking for access to a group");
      if (!isEligible(principal)) {
        throw permissionDenied(
          "Permission denied: only a root-level identity may request access to a group (an identity created under a group is confined to it); see CheckEligibility",
          "NOT_ELIGIBLE",
        );
      }
      const store = requests(ctx);
      // Access is asked of an organization: a sub-group is answered as a group that does not exist.
      if (!isRootUid(req.groupUid) || !(await store.groupExists(req.groupUid))) throw notFound(GroupSchema.typeName, req.groupUid);
      if (await store.hasBindingOn(principal.identityUid, req.groupUid)) {
        throw failedPrecondition(
          { type: "ALREADY_GRANTED", subject: req.groupUid, description: "the caller already holds a role binding on this group or one above it" },
          "ACCESS_ALREADY_GRANTED",
        );
      }
      const wait = await store.request(req.groupUid, principal.identityUid, deps.groupAccessRequestWindowMs);
      if (wait !== undefined) {
        throw resourceExhausted(
          `Access to group ${req.groupUid} was requested less than ${humanDuration(deps.groupAccessRequestWindowMs)} ago: its owners have been told; ask again later`,
          wait,
          "ACCESS_ALREADY_REQUESTED",
        );
      }
      return create(RequestGroupAccessResponseSchema, {});
    },
  };
}

/** The owners' view of the pending requests (apiserver.iam.v1, scoped: CAP_IAM_ROLE_BINDINGS_CREATE on the group). */
export function groupAccessRequestsBindings(deps: IamDeps): ServiceBinding[] {
  const requests = storeFactory(deps.db, createGroupAccessStore);
  const impl: ServiceImpl<typeof GroupAccessRequestsService> = {
    async listGroupAccessRequests(req, ctx) {
      const store = requests(ctx);
      if (!(await store.groupExists(req.group))) throw notFound(GroupSchema.typeName, req.group);
      const page = await store.listPending(deps.lists.plan(req, groupAccessRequestList, [req.group]), req.group);
      return create(ListGroupAccessRequestsResponseSchema, { groupAccessRequests: page.rows.map(toGroupAccessRequest), ...pageFields(page) });
    },
  };
  return [bindService(GroupAccessRequestsService, impl)];
}
