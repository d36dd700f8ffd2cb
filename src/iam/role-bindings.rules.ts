// What a role binding may name, checked from the uids alone (pure: no database).
//
// Decisions:
// - The identity must be one the caller can see: a root-level identity (a person: no '/'; its uid is a
//   random 160-bit value that the person hands over to be added, as with an invite), or one that lives
//   inside the same organization (root group) as the group of the binding and within the caller's scopes
//   for CAP_IAM_IDENTITY_LIST. Anything else, an identity of another organization included, gets the very
//   answer a uid naming nothing gets (NO_IDENTITY on the field), so a caller cannot tell a foreign identity
//   from an unknown one, and nothing of a foreign identity is ever echoed.
// - The role must be a managed role (no '/') or a custom role defined on the binding's group or on one of
//   its ancestors: a role defined elsewhere means nothing there.
// - Anything the request names in its body that cannot be used (malformed, not bindable here, or not
//   existing) is INVALID_ARGUMENT with a field violation on that field, also for references that do not
//   exist: the error then names the field (and, in a batch, the item), which NOT_FOUND could not; and an
//   identity or role of another organization is never reported as existing or not. NOT_FOUND is kept for
//   what the request addresses: the parent group, or the binding itself.
import type { FieldViolation } from "../kernel/errors/index.js";
import { isRootUid, isValidUid, isWithin, parentOf } from "../kernel/uidp.js";

/** One binding to create or to change into, with the field path its errors are reported on. */
export interface BindingTarget {
  identityUid: string;
  roleUid: string;
  /** Field path of the RoleBinding message in the request: "role_binding" or "requests[3].role_binding". */
  field: string;
}

/** What a binding's identity_uid that names no identity the caller may bind is told: unknown and foreign alike. */
export const NO_IDENTITY = "does not name an existing identity";

/** The organization (root group) a uid lives in. */
export function organizationOf(uid: string): string {
  return uid.split("/", 1)[0]!;
}

/** What can be told wrong with a target without reading anything, as violations. */
export function targetViolations(t: BindingTarget, group: string): FieldViolation[] {
  const out: FieldViolation[] = [];
  const identityField = `${t.field}.identity_uid`;
  if (t.identityUid === "") out.push({ field: identityField, description: "is required" });
  else if (!isValidUid(t.identityUid)) out.push({ field: identityField, description: "is not a valid uid" });
  else if (!isRootUid(t.identityUid) && organizationOf(t.identityUid) !== organizationOf(group)) {
    out.push({ field: identityField, description: NO_IDENTITY });
  }
  const roleField = `${t.field}.role_uid`;
  if (t.roleUid === "") out.push({ field: roleField, description: "is required" });
  else if (!isValidUid(t.roleUid)) out.push({ field: roleField, description: "is not a valid uid" });
  else if (!isRootUid(t.roleUid) && !isWithin(group, parentOf(t.roleUid)!)) {
    out.push({ field: roleField, description: `must name a managed role or a custom role defined on ${JSON.stringify(group)} or one of its ancestors` });
  }
  return out;
}

/** Violations for targets naming the same (identity, role) twice in one request. */
export function repeatViolations(targets: readonly BindingTarget[]): FieldViolation[] {
  const seen = new Map<string, string>();
  const out: FieldViolation[] = [];
  for (const t of targets) {
    const key = `${t.identityUid}\n${t.roleUid}`;
    const first = seen.get(key);
    if (first !== undefined) out.push({ field: t.field, description: `binds the same identity and role as ${first}` });
    else seen.set(key, t.field);
  }
  return out;
}

/** Violations for targets whose identity (among those the caller may bind) or role was not found. */
export function existenceViolations(
  targets: readonly BindingTarget[],
  identities: ReadonlySet<string>,
  roles: ReadonlySet<string>,
): FieldViolation[] {
  const out: FieldViolation[] = [];
  for (const t of targets) {
    if (!identities.has(t.identityUid)) out.push({ field: `${t.field}.identity_uid`, description: NO_IDENTITY });
    if (!roles.has(t.roleUid)) out.push({ field: `${t.field}.role_uid`, description: "does not name an existing role" });
  }
  return out;
}
