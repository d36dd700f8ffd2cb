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
import { Capability } from "../../gen/capabilities/capabilities_pb.js";
import { ListRolesResponseSchema, RoleSchema, RolesService, type Role } from "../../gen/chainguard/platform/iam/v2/roles_pb.js";
import { accessOf, listScopesOf } from "../kernel/auth/index.js";
import { invalidArgument, notFound, permissionDenied, type FieldViolation } from "../kernel/errors/index.js";
import { applyUpdate } from "../kernel/field-mask.js";
import { defineListSpec, pageFields, parseListRequest } from "../kernel/list/index.js";
import { isRootUid, isValidUid, newChildUid, parentOf } from "../kernel/uidp.js";
import type { DomainDeps, ServiceBinding } from "../server/bindings.js";
import { ROLE_TYPE, toRole } from "./roles.mapper.js";
import { capabilityViolations, normalizeCapabilities, requireNoEscalation } from "./roles.rules.js";
import * as store from "./roles.store.js";

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

/** Name and capabilities of a role about to be written, as violations on `role.*`. */
function roleViolations(role: Pick<Role, "name" | "capabilities">, checkCapabilities: boolean): FieldViolation[] {
  const out: FieldViolation[] = [];
  if (role.name.trim() === "") out.push({ field: "role.name", description: "is required" });
  if (checkCapabilities) out.push(...capabilityViolations(role.capabilities, "role.capabilities"));
  return out;
}

export function rolesBindings(deps: DomainDeps): ServiceBinding[] {
  const { db } = deps;

  const impl: ServiceImpl<typeof RolesService> = {
    async getRole(req, ctx) {
      requireUid(req.uid, "uid");
      const group = parentOf(req.uid);
      if (group !== undefined) await accessOf(ctx).require(group, [Capability.CAP_IAM_ROLES_LIST]);
      const row = await store.findRole(db, req.uid);
      if (!row) throw notFound(ROLE_TYPE, req.uid);
      return toRole(row);
    },

    async listRoles(req, ctx) {
      const scopes = await listScopesOf(ctx);
      const plan = parseListRequest(req, roleListSpec, {
        secret: deps.pageTokenSecret,
        filters: { uidp: req.uidp, name: req.name },
        scope: scopes,
      });
      const page = await store.listRoles(db, plan, { uidp: req.uidp, name: req.name, scopes });
      return create(ListRolesResponseSchema, { roles: page.rows.map(toRole), ...pageFields(page) });
    },

    async createRole(req, ctx) {
      // parent: checked by the interceptor (CAP_IAM_ROLES_CREATE).
      if (!req.role) throw invalidArgument({ field: "role", description: "is required" });
      const violations = roleViolations(req.role, true);
      if (violations.length > 0) throw invalidArgument(violations);
      const capabilities = normalizeCapabilities(req.role.capabilities);
      const held = await accessOf(ctx).capabilitiesAt(req.parent);
      requireNoEscalation(held, capabilities, req.parent, "the role");
      const row = await store.insertRole(db, {
        uid: newChildUid(req.parent),
        parentUid: req.parent,
        name: req.role.name,
        description: req.role.description,
        capabilities,
      });
      return toRole(row);
    },

    async updateRole(req, ctx) {
      // role.uid: checked by the interceptor (CAP_IAM_ROLES_UPDATE).
      const patch = req.role;
      if (!patch) throw invalidArgument({ field: "role", description: "is required" });
      refuseManaged(patch.uid);
      const group = parentOf(patch.uid)!;
      const held = await accessOf(ctx).capabilitiesAt(group);
      const row = await db.transaction(async (tx) => {
        const current = await store.findRole(tx, patch.uid, "update");
        if (!current || current.managed) throw notFound(ROLE_TYPE, patch.uid);
        const before = toRole(current);
        const { message: after, changed } = applyUpdate(RoleSchema, before, patch, req.updateMask);
        if (changed.length === 0) return current;
        const capsChanged = changed.includes("capabilities");
        const violations = roleViolations(after, capsChanged);
        if (violations.length > 0) throw invalidArgument(violations);
        const capabilities = normalizeCapabilities(after.capabilities);
        const added = capabilities.filter((c) => !current.capabilities.includes(c));
        requireNoEscalation(held, added, group, "the role");
        return store.updateRole(tx, patch.uid, { name: after.name, description: after.description, capabilities });
      });
      return toRole(row);
    },

    async deleteRole(req) {
      // uid: checked by the interceptor (CAP_IAM_ROLES_DELETE).
      refuseManaged(req.uid);
      if (!(await store.deleteRole(db, req.uid))) throw notFound(ROLE_TYPE, req.uid);
      return {};
    },
  };

  return [{ service: RolesService, impl }];
}
