// RoleBindingsService. A binding grants an identity a role's capabilities on a group and everything beneath
// it; responses are hydrated with the identity, group and role.
//
// Decisions (see also role-bindings.rules.ts for what a binding may name):
// - No escalation: creating a binding, or changing its identity or role, needs every capability of the role
//   on the binding's group (PERMISSION_DENIED naming the missing ones).
// - Creates (one or a batch) run in the call's unit of work: the parent group is checked (NOT_FOUND, also when a
//   concurrent DeleteGroup wins: the insert's foreign key decides), identities and roles are read in one
//   query each (identities key-share-locked against a concurrent delete, roles share-locked against a
//   concurrent change of their capabilities), then every binding is inserted; a duplicate (group, identity,
//   role) is ALREADY_EXISTS and leaves nothing behind.
// - Only identities the caller can see are bound (role-bindings.rules.ts): one of another organization is
//   answered as a uid naming nothing.
// - Batch: 1 to 25 requests; each inner parent empty or equal to the outer one; when the outer role_uid is
//   set, each inner role_uid is empty (it inherits the outer one) or equal to it, and a different one is
//   INVALID_ARGUMENT (AIP-233 conflict), never a binding of the other role. All violations of all items are
//   reported at once, with the item in the path.
// - UpdateRoleBinding may change identity_uid and role_uid, under the same checks as a create.
// - Get/Update/Delete of a uid without a group part answer NOT_FOUND (no binding lives at the root).
import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  BatchCreateRoleBindingsResponseSchema,
  ListRoleBindingsResponseSchema,
  RoleBindingSchema,
  RoleBindingsService,
} from "../../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import { Capability } from "../../gen/capabilities/capabilities_pb.js";
import { IdentitySchema } from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import { accessOf, listScopesOf } from "../kernel/auth/index.js";
import { type FieldViolation, invalidArgument, notFound, throwIfAny } from "../kernel/errors/index.js";
import { defineListSpec, pageFields } from "../kernel/list/index.js";
import { storeFactory } from "../kernel/unit-of-work.js";
import { updateUnderLock } from "../kernel/update.js";
import { isValidUid, parentOf } from "../kernel/uidp.js";
import { bindService, type ServiceBinding } from "../kernel/module.js";
import type { IamDeps } from "./deps.js";
import { createGroupStore } from "./groups.store.js";
import { toRoleBinding } from "./role-bindings.mapper.js";
import { missingRoleViolations, repeatViolations, targetViolations, unbindableIdentity, type BindingTarget } from "./role-bindings.rules.js";
import { createRoleBindingStore } from "./role-bindings.store.js";
import { requireNoEscalation } from "./roles.rules.js";
import { createRoleStore } from "./roles.store.js";

/** The most bindings one BatchCreateRoleBindings may create. */
export const MAX_BATCH = 25;

export const roleBindingListSpec = defineListSpec({
  name: "iam.v2.ListRoleBindings",
  message: RoleBindingSchema,
  orderBy: ["create_time", "update_time"],
  defaultOrder: "create_time",
});

function requireListFilterUid(value: string, field: string): void {
  if (value !== "" && !isValidUid(value)) throw invalidArgument({ field, description: "is not a valid uid" });
}

export function roleBindingsBindings(deps: IamDeps): ServiceBinding[] {
  const bindings = storeFactory(deps.db, createRoleBindingStore);
  const roles = storeFactory(deps.db, createRoleStore);
  const groups = storeFactory(deps.db, createGroupStore);

  /**
   * Checks targets in the call's transaction: the identities exist and the caller can see them (root-level,
   * or within its scopes for CAP_IAM_IDENTITY_LIST), the roles exist (share-locked against a concurrent change
   * of their capabilities), and the caller holds every capability of each role on `group` (`held`, from the
   * caller's grants).
   */
  const checkTargets = async (ctx: HandlerContext, held: ReadonlySet<number>, group: string, targets: readonly BindingTarget[]) => {
    const visible = await accessOf(ctx).visibleScopes([Capability.CAP_IAM_IDENTITY_LIST]);
    const identities = await bindings(ctx).bindableIdentities(targets.map((t) => t.identityUid), visible);
    // Unknown, foreign and unseen identities alike: the same NOT_FOUND, nothing of the identity echoed.
    const unbindable = unbindableIdentity(targets, group, identities);
    if (unbindable !== undefined) throw notFound(IdentitySchema.typeName, unbindable);
    const found = new Map((await roles(ctx).findShared(targets.map((t) => t.roleUid))).map((r) => [r.uid, r]));
    throwIfAny(missingRoleViolations(targets, new Set(found.keys())));
    for (const t of targets) {
      const what = targets.length > 1 ? `${t.field} (role ${JSON.stringify(t.roleUid)})` : `binding role ${JSON.stringify(t.roleUid)}`;
      requireNoEscalation(held, found.get(t.roleUid)!.capabilities, group, what);
    }
  };

  /** Validates and creates bindings on `parent`, all or none; returns them hydrated, in request order. */
  const createAll = async (ctx: HandlerContext, parent: string, targets: BindingTarget[]) => {
    throwIfAny([...targets.flatMap((t) => targetViolations(t, parent)), ...repeatViolations(targets)]);
    const held = await accessOf(ctx).capabilitiesAt(parent);
    await groups(ctx).get(parent);
    await checkTargets(ctx, held, parent, targets);
    const rows = await bindings(ctx).createMany(parent, targets.map((t) => ({ identityUid: t.identityUid, roleUid: t.roleUid })));
    return bindings(ctx).findHydratedMany(rows.map((r) => r.uid));
  };

  const impl: ServiceImpl<typeof RoleBindingsService> = {
    async getRoleBinding(req, ctx) {
      // uid: checked by the interceptor (CAP_IAM_ROLE_BINDINGS_LIST).
      return toRoleBinding(await bindings(ctx).getHydrated(req.uid));
    },

    async createRoleBinding(req, ctx) {
      // parent: checked by the interceptor (CAP_IAM_ROLE_BINDINGS_CREATE).
      const b = req.roleBinding;
      const [row] = await createAll(ctx, req.parent, [{ identityUid: b?.identityUid ?? "", roleUid: b?.roleUid ?? "", field: "role_binding" }]);
      return toRoleBinding(row!);
    },

    async batchCreateRoleBindings(req, ctx) {
      // parent: checked by the interceptor (CAP_IAM_ROLE_BINDINGS_CREATE).
      if (req.requests.length === 0) throw invalidArgument({ field: "requests", description: "at least one request is required" });
      if (req.requests.length > MAX_BATCH) {
        throw invalidArgument({ field: "requests", description: `at most ${MAX_BATCH} requests are allowed, got ${req.requests.length}` });
      }
      // An item may leave parent and role_uid to the batch, or repeat them; naming others is a conflict (AIP-233).
      const conflicts = req.requests.flatMap((r, i): FieldViolation[] => {
        const out: FieldViolation[] = [];
        if (r.parent !== "" && r.parent !== req.parent) out.push({ field: `requests[${i}].parent`, description: "must be empty or equal to parent" });
        const role = r.roleBinding?.roleUid ?? "";
        if (req.roleUid !== "" && role !== "" && role !== req.roleUid) {
          out.push({ field: `requests[${i}].role_binding.role_uid`, description: `must be empty or equal to role_uid ${JSON.stringify(req.roleUid)}` });
        }
        return out;
      });
      throwIfAny(conflicts);
      const targets = req.requests.map((r, i) => ({
        identityUid: r.roleBinding?.identityUid ?? "",
        roleUid: r.roleBinding?.roleUid || req.roleUid,
        field: `requests[${i}].role_binding`,
      }));
      const rows = await createAll(ctx, req.parent, targets);
      return create(BatchCreateRoleBindingsResponseSchema, { roleBindings: rows.map(toRoleBinding) });
    },

    async updateRoleBinding(req, ctx) {
      // role_binding.uid: checked by the interceptor (CAP_IAM_ROLE_BINDINGS_UPDATE).
      const patch = req.roleBinding;
      if (!patch) throw invalidArgument({ field: "role_binding", description: "is required" });
      // A binding lives in a group: a uid without one names none.
      const group = parentOf(patch.uid);
      if (group === undefined) throw notFound(RoleBindingSchema.typeName, patch.uid);
      const held = await accessOf(ctx).capabilitiesAt(group);
      await updateUnderLock(bindings(ctx), patch.uid, patch, req.updateMask, {
        schema: RoleBindingSchema,
        field: "role_binding",
        toMessage: (current) => create(RoleBindingSchema, { uid: current.uid, identityUid: current.identityUid, roleUid: current.roleUid }),
        toFields: (next) => ({ identityUid: next.identityUid, roleUid: next.roleUid }),
        check: async (next, _changed, current) => {
          const target: BindingTarget = { identityUid: next.identityUid, roleUid: next.roleUid, field: "role_binding" };
          throwIfAny(targetViolations(target, current.groupUid));
          await checkTargets(ctx, held, current.groupUid, [target]);
          return [];
        },
      });
      return toRoleBinding(await bindings(ctx).getHydrated(patch.uid));
    },

    async deleteRoleBinding(req, ctx) {
      // uid: checked by the interceptor (CAP_IAM_ROLE_BINDINGS_DELETE).
      await bindings(ctx).remove(req.uid);
      return {};
    },

    async listRoleBindings(req, ctx) {
      requireListFilterUid(req.identity, "identity");
      requireListFilterUid(req.group, "group");
      requireListFilterUid(req.role, "role");
      const scopes = await listScopesOf(ctx);
      const filter = { scopes, uidp: req.uidp, identity: req.identity, group: req.group, role: req.role };
      const page = await bindings(ctx).list(deps.lists.plan(req, roleBindingListSpec, scopes), filter);
      return create(ListRoleBindingsResponseSchema, { roleBindings: page.rows.map(toRoleBinding), ...pageFields(page) });
    },
  };

  return [bindService(RoleBindingsService, impl)];
}
