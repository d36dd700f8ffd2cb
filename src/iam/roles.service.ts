// RolesService. Managed roles (uid without '/') are readable by every authenticated caller and can never be
// changed or deleted; custom roles live under a group and follow that group's capabilities.
//
// Decisions:
// - GetRole and ListRoles are unscoped: the handler checks. A custom role needs CAP_IAM_ROLES_LIST on its
//   group, checked from the uid before anything is read (PERMISSION_DENIED whether or not it exists).
// - Update and Delete of a managed role (any uid without '/') are PERMISSION_DENIED: the scoped check already
//   refuses them (no binding is ever on a managed role's uid); the handler repeats it so a uid that happens
//   to be a group's cannot slip through.
// - Escalation on update counts only the capabilities being added: removing a capability, or renaming, never
//   grants anything.
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { ListRolesResponseSchema, RoleSchema, RolesService, type Role } from "../../gen/chainguard/platform/iam/v2/roles_pb.js";
import { accessOf, listScopesOf, requireRuleAt } from "../kernel/auth/index.js";
import { invalidArgument, permissionDenied, throwIfAny, type FieldViolation, under } from "../kernel/errors/index.js";
import { defineListSpec, pageFields } from "../kernel/list/index.js";
import { storeFactory } from "../kernel/unit-of-work.js";
import { updateUnderLock } from "../kernel/update.js";
import { isRootUid, isValidUid, parentOf } from "../kernel/uidp.js";
import { bindService, type ServiceBinding } from "../kernel/module.js";
import type { IamDeps } from "./deps.js";
import { toRole } from "./roles.mapper.js";
import { capabilityViolations, normalizeCapabilities, requireNoEscalation } from "./roles.rules.js";
import { createRoleStore } from "./roles.store.js";

export const roleListSpec = defineListSpec({
  name: "iam.v2.ListRoles",
  message: RoleSchema,
  orderBy: ["name", "create_time", "update_time"],
  defaultOrder: "name",
});

/** INVALID_ARGUMENT unless `uid` is present and well formed. */
function requireUid(uid: string, field: string): void {
  if (uid === "") throw invalidArgument({ field, description: "is required" });
  if (!isValidUid(uid)) throw invalidArgument({ field, description: "is not a valid uid" });
}

function refuseManaged(uid: string): void {
  if (isRootUid(uid)) throw permissionDenied(`Permission denied: ${JSON.stringify(uid)} is a managed role (or not a role); managed roles cannot be changed or deleted`);
}

/** Name and capabilities of a role about to be written, as violations relative to the role. */
function roleViolations(role: Pick<Role, "name" | "capabilities">, checkCapabilities: boolean): FieldViolation[] {
  const out: FieldViolation[] = [];
  if (role.name.trim() === "") out.push({ field: "name", description: "is required" });
  if (checkCapabilities) out.push(...capabilityViolations(role.capabilities, "capabilities"));
  return out;
}

export function rolesBindings(deps: IamDeps): ServiceBinding[] {
  const roles = storeFactory(deps.db, createRoleStore);

  const impl: ServiceImpl<typeof RolesService> = {
    async getRole(req, ctx) {
      requireUid(req.uid, "uid");
      // A custom role is read with the rule's capability on its group, checked before anything is read.
      const group = parentOf(req.uid);
      if (group !== undefined) await requireRuleAt(ctx, group);
      return toRole(await roles(ctx).get(req.uid));
    },

    async listRoles(req, ctx) {
      const scopes = await listScopesOf(ctx);
      const page = await roles(ctx).list(deps.lists.plan(req, roleListSpec, scopes), { uidp: req.uidp, name: req.name, scopes });
      return create(ListRolesResponseSchema, { roles: page.rows.map(toRole), ...pageFields(page) });
    },

    async createRole(req, ctx) {
      // parent: checked by the interceptor (CAP_IAM_ROLES_CREATE).
      if (!req.role) throw invalidArgument({ field: "role", description: "is required" });
      throwIfAny(under("role", roleViolations(req.role, true)));
      const capabilities = normalizeCapabilities(req.role.capabilities);
      requireNoEscalation(await accessOf(ctx).capabilitiesAt(req.parent), capabilities, req.parent, "the role");
      return toRole(await roles(ctx).create(req.parent, { name: req.role.name, description: req.role.description, capabilities }));
    },

    async updateRole(req, ctx) {
      // role.uid: checked by the interceptor (CAP_IAM_ROLES_UPDATE).
      const patch = req.role;
      if (!patch) throw invalidArgument({ field: "role", description: "is required" });
      refuseManaged(patch.uid);
      const group = parentOf(patch.uid)!;
      const held = await accessOf(ctx).capabilitiesAt(group);
      const row = await updateUnderLock(roles(ctx), patch.uid, patch, req.updateMask, {
        schema: RoleSchema,
        field: "role",
        toMessage: toRole,
        toFields: (next) => ({ name: next.name, description: next.description, capabilities: normalizeCapabilities(next.capabilities) }),
        check: (next, changed, current) => {
          const violations = roleViolations(next, changed.includes("capabilities"));
          if (violations.length > 0) return violations;
          // Escalation counts only the capabilities being added: removing one, or renaming, grants nothing.
          const added = normalizeCapabilities(next.capabilities).filter((c) => !current.capabilities.includes(c));
          requireNoEscalation(held, added, group, "the role");
          return [];
        },
      });
      return toRole(row);
    },

    async deleteRole(req, ctx) {
      // uid: checked by the interceptor (CAP_IAM_ROLES_DELETE).
      refuseManaged(req.uid);
      await roles(ctx).remove(req.uid);
      return {};
    },
  };

  return [bindService(RolesService, impl)];
}
