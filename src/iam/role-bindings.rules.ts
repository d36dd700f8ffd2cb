// What a role binding may name, checked from the uids alone (pure: no database).
//
// Decisions:
// - The identity must be one the caller can see: a root-level identity (a person: no '/'; its uid is
//   derived from its issuer and subject, which LookupIdentity resolves for any caller), or one that lives
//   inside the same organization (root group) as the group of the binding and within the caller's scopes
//   for CAP_IAM_IDENTITY_LIST. Anything else, an identity of another organization included, gets the very
//   answer a uid naming nothing gets: NOT_FOUND naming that uid as an Identity, so a caller cannot tell a
//   foreign identity from an unknown one, and nothing of a foreign identity is ever echoed.
// - The role must be a managed role (no '/') or a custom role defined on the binding's group or on one of
//   its ancestors: a role defined elsewhere means nothing there.
// - A role or identity uid that is malformed, and a role that is not bindable here or does not exist, is
//   INVALID_ARGUMENT with a field violation on that field (in a batch, the item's). A role of another
//   organization is never reported as existing or not.
import type { FieldViolation } from "../kernel/errors/index.js";
import { isRootUid, isValidUid, isWithin, parentOf } from "../kernel/uidp.js";

/** One binding to create or to change into, with the field path its errors are reported on. */
export interface BindingTarget {
  identityUid: string;
  roleUid: string;
  /** Field path of the RoleBinding message in the request: "role_binding" or "requests[3].role_binding". */
  field: string;
}

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
  out.push(...roleViolations(t.roleUid, `${t.field}.role_uid`, group));
  return out;
}

/**
 * What is wrong with the role of a binding on `group`, from its uid alone, as violations on `field`: it is
 * required, and must be a managed role or a custom role of the group or of one of its ancestors. Also the
 * rule for the role of an external group role mapping, whose bindings are made on its scope.
 */
export function roleViolations(roleUid: string, field: string, group: string): FieldViolation[] {
  if (roleUid === "") return [{ field, description: "is required" }];
  if (!isValidUid(roleUid)) return [{ field, description: "is not a valid uid" }];
  if (!isRootUid(roleUid) && !isWithin(group, parentOf(roleUid)!)) {
    return [{ field, description: `must name a managed role or a custom role defined on ${JSON.stringify(group)} or one of its ancestors` }];
  }
  return [];
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

/**
 * The first identity of the targets the caller may not bind on `group` (`bindable`: those it can see): one
 * of another organization, or one that is unknown or outside the caller's sight. Undefined when all may be.
 */
export function unbindableIdentity(targets: readonly BindingTarget[], group: string, bindable: ReadonlySet<string>): string | undefined {
  const foreign = (uid: string) => !isRootUid(uid) && organizationOf(uid) !== organizationOf(group);
  return targets.find((t) => foreign(t.identityUid) || !bindable.has(t.identityUid))?.identityUid;
}

/** Violations for targets whose role was not found. */
export function missingRoleViolations(targets: readonly BindingTarget[], roles: ReadonlySet<string>): FieldViolation[] {
  return targets.flatMap((t) => (roles.has(t.roleUid) ? [] : [{ field: `${t.field}.role_uid`, description: "does not name an existing role" }]));
}
