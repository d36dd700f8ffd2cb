// The rules a role's capabilities follow, shared by roles and role bindings (pure: no database).
//
// - A role created or changed through the API carries at least one capability, each a value of the
//   Capability enum other than UNKNOWN and not marked internal_only (capabilityopts/v1/capability.proto).
// - No escalation: a caller may only put in a role, or grant through a binding, capabilities it holds itself
//   at that scope (roles.md). The caller's capabilities come from the grants the auth interceptor read
//   before the call's unit of work began (the embedded database runs one transaction at a time, so a read
//   beside the call's transaction would wait on itself).
import { getOption } from "@bufbuild/protobuf";
import { internal_only } from "../../gen/apiserver/capabilityopts/v1/capability_pb.js";
import { Capability, CapabilitySchema } from "../../gen/capabilities/capabilities_pb.js";
import { permissionDenied, type FieldViolation } from "../kernel/errors/index.js";

const known: ReadonlyMap<number, string> = new Map(CapabilitySchema.values.map((v) => [v.number, v.name]));

/** Capabilities that exist for the service's own use: never put in a role through the API. */
export const internalOnlyCapabilities: ReadonlySet<number> = new Set(
  CapabilitySchema.values.filter((v) => getOption(v, internal_only)).map((v) => v.number),
);

/** The enum name of a capability ("CAP_REPO_LIST"), or its number for a value the enum does not have. */
export function capabilityName(c: number): string {
  return known.get(c) ?? String(c);
}

/** Sorted, without duplicates. */
export function normalizeCapabilities(caps: readonly number[]): Capability[] {
  return [...new Set(caps)].sort((a, b) => a - b) as Capability[];
}

/** What is wrong with a role's capability list, as violations on `field` (empty when it is valid). */
export function capabilityViolations(caps: readonly number[], field: string): FieldViolation[] {
  if (caps.length === 0) return [{ field, description: "at least one capability is required" }];
  const out: FieldViolation[] = [];
  for (const c of new Set(caps)) {
    if (c === Capability.UNKNOWN) out.push({ field, description: "UNKNOWN is not a capability" });
    else if (!known.has(c)) out.push({ field, description: `${c} is not a known capability` });
    else if (internalOnlyCapabilities.has(c)) out.push({ field, description: `${capabilityName(c)} is internal-only and cannot be put in a role` });
  }
  return out;
}

/** Missing capabilities named in an escalation error; the rest are counted (errors stay small). */
const MAX_NAMED = 5;

/**
 * Throws PERMISSION_DENIED unless `held` (the caller's capabilities at `scope`) contains every one of `caps`.
 * `what` names the thing being created or changed, for the message.
 */
export function requireNoEscalation(held: ReadonlySet<number>, caps: readonly number[], scope: string, what: string): void {
  const missing = normalizeCapabilities(caps.filter((c) => !held.has(c)));
  if (missing.length === 0) return;
  const names = missing.slice(0, MAX_NAMED).map(capabilityName).join(", ");
  const more = missing.length > MAX_NAMED ? ` and ${missing.length - MAX_NAMED} more` : "";
  throw permissionDenied(`Permission denied: ${what} would grant capabilities the caller does not hold on ${JSON.stringify(scope)}: ${names}${more}`);
}
