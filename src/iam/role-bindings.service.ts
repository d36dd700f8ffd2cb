// RoleBindingsService. A binding grants an identity a role's capabilities on a group and everything beneath
// it; responses are hydrated with the identity, group and role.
//
// Decisions (see also role-bindings.rules.ts for what a binding may name):
// - No escalation: creating a binding, or changing its identity or role, needs every capability of the role
//   on the binding's group (PERMISSION_DENIED naming the missing ones).
// - Creates (one or a batch) run in one transaction: the parent group is checked (NOT_FOUND), identities and
//   roles are read in one query each (roles share-locked against a concurrent change of their
//   capabilities), then every binding is inserted; a duplicate (group, identity, role) is ALREADY_EXISTS and
//   leaves nothing behind.
// - Batch: 1 to 25 requests; each inner parent empty or equal to the outer one; an inner role_uid defaults
//   to the outer role_uid. All violations of all items are reported at once, with the item in the path.
// - UpdateRoleBinding may change identity_uid and role_uid, under the same checks as a create.
// - Get/Update/Delete of a uid without a group part answer NOT_FOUND (no binding lives at the root).
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { GroupSchema } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import {
  BatchCreateRoleBindingsResponseSchema,
  ListRoleBindingsResponseSchema,
  RoleBindingSchema,
  RoleBindingsService,
} from "../../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import { accessOf, listScopesOf } from "../kernel/auth/index.js";
import { type FieldViolation, invalidArgument, notFound, throwIfAny } from "../kernel/errors/index.js";
import { applyUpdate } from "../kernel/field-mask.js";
import { defineListSpec, pageFields, parseListRequest, type AnyPgDatabase } from "../kernel/list/index.js";
import { isValidUid, newChildUid, parentOf } from "../kernel/uidp.js";
import type { DomainDeps, ServiceBinding } from "../server/bindings.js";
import { toRoleBinding } from "./role-bindings.mapper.js";
import { existenceViolations, repeatViolations, targetViolations, type BindingTarget } from "./role-bindings.rules.js";
import * as store from "./role-bindings.store.js";
import { ROLE_BINDING_TYPE } from "./role-bindings.store.js";
import { requireNoEscalation } from "./roles.rules.js";
import { findRoles } from "./roles.store.js";

/** The most bindings one BatchCreateRoleBindings may create. */
export const MAX_BATCH = 25;

export const roleBindingListSpec = defineListSpec({
  name: "iam.v2.ListRoleBindings",
  message: RoleBindingSchema,
  orderBy: ["create_time", "update_time"],
  defaultOrder: "create_time",
});


/**
 * Checks targets against the database (inside the caller's transaction): the identities and roles exist,
 * and the caller holds every capability of each role on `group` (`held`, read before the transaction).
 */
async function checkTargets(tx: AnyPgDatabase, held: ReadonlySet<number>, group: string, targets: readonly BindingTarget[]): Promise<void> {
  const identities = await store.existingIdentities(tx, targets.map((t) => t.identityUid));
  const roles = new Map((await findRoles(tx, targets.map((t) => t.roleUid), "share")).map((r) => [r.uid, r]));
  throwIfAny(existenceViolations(targets, identities, new Set(roles.keys())));
  for (const t of targets) {
    const what = targets.length > 1 ? `${t.field} (role ${JSON.stringify(t.roleUid)})` : `binding role ${JSON.stringify(t.roleUid)}`;
    requireNoEscalation(held, roles.get(t.roleUid)!.capabilities, group, what);
  }
}

function requireListFilterUid(value: string, field: string): void {
  if (value !== "" && !isValidUid(value)) throw invalidArgument({ field, description: "is not a valid uid" });
}

export function roleBindingsBindings(deps: DomainDeps): ServiceBinding[] {
  const { db } = deps;

  /** Validates and creates bindings on `parent`, all or none; returns them hydrated, in request order. */
  const createAll = async (held: ReadonlySet<number>, parent: string, targets: BindingTarget[]) => {
    throwIfAny([...targets.flatMap((t) => targetViolations(t, parent)), ...repeatViolations(targets)]);
    return db.transaction(async (tx) => {
      if (!(await store.findGroup(tx, parent))) throw notFound(GroupSchema.typeName, parent);
      await checkTargets(tx, held, parent, targets);
      const rows = targets.map((t) => ({ uid: newChildUid(parent), groupUid: parent, identityUid: t.identityUid, roleUid: t.roleUid }));
      await store.insertBindings(tx, rows);
      return store.findHydratedMany(tx, rows.map((r) => r.uid));
    });
  };

  const impl: ServiceImpl<typeof RoleBindingsService> = {
    async getRoleBinding(req) {
      // uid: checked by the interceptor (CAP_IAM_ROLE_BINDINGS_LIST).
      const row = parentOf(req.uid) === undefined ? undefined : await store.findHydrated(db, req.uid);
      if (!row) throw notFound(ROLE_BINDING_TYPE, req.uid);
      return toRoleBinding(row);
    },

    async createRoleBinding(req, ctx) {
      // parent: checked by the interceptor (CAP_IAM_ROLE_BINDINGS_CREATE).
      const b = req.roleBinding;
      const held = await accessOf(ctx).capabilitiesAt(req.parent);
      const [row] = await createAll(held, req.parent, [{ identityUid: b?.identityUid ?? "", roleUid: b?.roleUid ?? "", field: "role_binding" }]);
      return toRoleBinding(row!);
    },

    async batchCreateRoleBindings(req, ctx) {
      // parent: checked by the interceptor (CAP_IAM_ROLE_BINDINGS_CREATE).
      if (req.requests.length === 0) throw invalidArgument({ field: "requests", description: "at least one request is required" });
      if (req.requests.length > MAX_BATCH) {
        throw invalidArgument({ field: "requests", description: `at most ${MAX_BATCH} requests are allowed, got ${req.requests.length}` });
      }
      const parents = req.requests.flatMap((r, i): FieldViolation[] =>
        r.parent === "" || r.parent === req.parent ? [] : [{ field: `requests[${i}].parent`, description: "must be empty or equal to parent" }],
      );
      throwIfAny(parents);
      const targets = req.requests.map((r, i) => ({
        identityUid: r.roleBinding?.identityUid ?? "",
        roleUid: r.roleBinding?.roleUid || req.roleUid,
        field: `requests[${i}].role_binding`,
      }));
      const held = await accessOf(ctx).capabilitiesAt(req.parent);
      const rows = await createAll(held, req.parent, targets);
      return create(BatchCreateRoleBindingsResponseSchema, { roleBindings: rows.map(toRoleBinding) });
    },

    async updateRoleBinding(req, ctx) {
      // role_binding.uid: checked by the interceptor (CAP_IAM_ROLE_BINDINGS_UPDATE).
      const patch = req.roleBinding;
      if (!patch) throw invalidArgument({ field: "role_binding", description: "is required" });
      const group = parentOf(patch.uid);
      if (group === undefined) throw notFound(ROLE_BINDING_TYPE, patch.uid);
      const held = await accessOf(ctx).capabilitiesAt(group);
      const row = await db.transaction(async (tx) => {
        const current = await store.lockBinding(tx, patch.uid);
        if (!current) throw notFound(ROLE_BINDING_TYPE, patch.uid);
        const before = create(RoleBindingSchema, { uid: current.uid, identityUid: current.identityUid, roleUid: current.roleUid });
        const { message: after, changed } = applyUpdate(RoleBindingSchema, before, patch, req.updateMask);
        if (changed.length > 0) {
          const target: BindingTarget = { identityUid: after.identityUid, roleUid: after.roleUid, field: "role_binding" };
          throwIfAny(targetViolations(target, current.groupUid));
          await checkTargets(tx, held, current.groupUid, [target]);
          await store.updateBinding(tx, current, { identityUid: after.identityUid, roleUid: after.roleUid });
        }
        return store.findHydrated(tx, patch.uid);
      });
      return toRoleBinding(row!);
    },

    async deleteRoleBinding(req) {
      // uid: checked by the interceptor (CAP_IAM_ROLE_BINDINGS_DELETE).
      if (parentOf(req.uid) === undefined || !(await store.deleteBinding(db, req.uid))) throw notFound(ROLE_BINDING_TYPE, req.uid);
      return {};
    },

    async listRoleBindings(req, ctx) {
      requireListFilterUid(req.identity, "identity");
      requireListFilterUid(req.group, "group");
      requireListFilterUid(req.role, "role");
      const scopes = await listScopesOf(ctx);
      const filters = { uidp: req.uidp, identity: req.identity, group: req.group, role: req.role };
      const plan = parseListRequest(req, roleBindingListSpec, { secret: deps.pageTokenSecret, filters, scope: scopes });
      const page = await store.listBindings(db, plan, { ...filters, scopes });
      return create(ListRoleBindingsResponseSchema, { roleBindings: page.rows.map(toRoleBinding), ...pageFields(page) });
    },
  };

  return [{ service: RoleBindingsService, impl }];
}
