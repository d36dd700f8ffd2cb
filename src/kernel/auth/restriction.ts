// Down-scoped tokens: what the token exchange's `scopes` and `cap` restrict a token of this server to, how
// the restriction travels in the token, and what it leaves of an identity's role bindings.
//
// Scopes, as the published oidc.platform.proto describes them: a token restricted to group S keeps the role
// bindings granted at S or inherited from one of its ancestors, each reaching S and what lies beneath it
// only; a binding granted beneath S is not kept (restrict the token to that group too to keep it). Several
// scopes keep what each keeps. Capabilities: every kept binding grants only the listed capabilities it has.
// A restriction never adds anything: what a restricted token may do is what its identity may do, now, less
// what the restriction leaves out (asking for a group or a capability the identity does not hold gives a
// token that cannot act there). It is read on every call with the identity's current bindings.
import { getOption } from "@bufbuild/protobuf";
import { name as capabilityNameOption } from "../../../gen/apiserver/capabilityopts/v1/capability_pb.js";
import { Capability, CapabilitySchema } from "../../../gen/capabilities/capabilities_pb.js";
import { ancestorsOf, isWithin } from "../uidp.js";

export interface TokenRestriction {
  /** The groups the token is restricted to; undefined: no restriction by group. */
  scopes?: readonly string[] | undefined;
  /** The capabilities the token is restricted to; undefined: no restriction by capability. */
  capabilities?: readonly Capability[] | undefined;
}

/** The JWT claims carrying a restriction: group uids, and capability enum names. */
export const SCOPES_CLAIM = "scopes";
export const CAPABILITIES_CLAIM = "cap";

/** The most groups one token may be restricted to (each travels in every token of a chain). */
export const MAX_RESTRICTION_SCOPES = 50;

const byEnumName: ReadonlyMap<string, Capability> = new Map(CapabilitySchema.values.filter((v) => v.number !== 0).map((v) => [v.name, v.number as Capability]));
const bySdkName: ReadonlyMap<string, Capability> = new Map(
  CapabilitySchema.values.flatMap((v) => {
    const n = getOption(v, capabilityNameOption);
    return n ? [[n, v.number as Capability] as const] : [];
  }),
);

/**
 * The capability a `cap` value names: the SDK's name ("repo.list", as its capabilities package spells it)
 * or the enum name ("CAP_REPO_LIST"); undefined for anything else.
 */
export function capabilityByName(name: string): Capability | undefined {
  return bySdkName.get(name) ?? byEnumName.get(name);
}

/** True when the restriction leaves out nothing. */
export function isUnrestricted(r: TokenRestriction | undefined): boolean {
  return r === undefined || (r.scopes === undefined && r.capabilities === undefined);
}

/** The restriction's claims, for a token of this server (none for an unrestricted token). */
export function restrictionClaims(r: TokenRestriction | undefined): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  if (r?.scopes !== undefined) out[SCOPES_CLAIM] = [...r.scopes];
  if (r?.capabilities !== undefined) out[CAPABILITIES_CLAIM] = r.capabilities.map((c) => Capability[c]);
  return out;
}

/**
 * The restriction a verified token of this server carries; throws when a claim is not a list of strings
 * (never minted so: the token is refused rather than read as unrestricted). A capability name this server no
 * longer knows grants nothing.
 */
export function restrictionOfClaims(payload: Record<string, unknown>): TokenRestriction | undefined {
  const scopes = stringList(payload[SCOPES_CLAIM], SCOPES_CLAIM);
  const caps = stringList(payload[CAPABILITIES_CLAIM], CAPABILITIES_CLAIM);
  if (scopes === undefined && caps === undefined) return undefined;
  return {
    ...(scopes !== undefined ? { scopes } : {}),
    ...(caps !== undefined ? { capabilities: caps.flatMap((n) => byEnumName.get(n) ?? []) } : {}),
  };
}

function stringList(value: unknown, claim: string): string[] | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || value.some((v) => typeof v !== "string")) throw new Error(`claim ${claim} is not a list of strings`);
  return value as string[];
}

/** What restricted grants are made of: where a binding is, where it reaches, what it grants. */
export interface RestrictableGrant {
  /** The group the binding is on. */
  bindingGroup: string;
  /** Where it reaches for the identity (its subtree, narrowed to the identity's home group). */
  scope: string;
  capabilities: ReadonlySet<number>;
}

/** Grants by the group their binding is on, made once per list of grants (restrictGrants). */
const byBindingGroup = new WeakMap<readonly RestrictableGrant[], Map<string, RestrictableGrant[]>>();

function indexByBindingGroup(grants: readonly RestrictableGrant[]): Map<string, RestrictableGrant[]> {
  let index = byBindingGroup.get(grants);
  if (!index) {
    index = new Map();
    for (const g of grants) {
      const list = index.get(g.bindingGroup);
      if (list) list.push(g);
      else index.set(g.bindingGroup, [g]);
    }
    byBindingGroup.set(grants, index);
  }
  return index;
}

/**
 * The grants left of `grants` under the restriction (see the top of this file). With scopes, only bindings
 * on a scope or one of its ancestors are kept: they are looked up per ancestor, not found by a scan.
 */
export function restrictGrants(grants: readonly RestrictableGrant[], r: TokenRestriction): Array<{ scope: string; capabilities: ReadonlySet<number> }> {
  const allowed = r.capabilities === undefined ? undefined : new Set<number>(r.capabilities);
  const kept = (g: RestrictableGrant) => (allowed === undefined ? g.capabilities : new Set([...g.capabilities].filter((c) => allowed.has(c))));
  const out: Array<{ scope: string; capabilities: ReadonlySet<number> }> = [];
  if (r.scopes === undefined) {
    for (const g of grants) {
      const capabilities = kept(g);
      if (capabilities.size > 0) out.push({ scope: g.scope, capabilities });
    }
    return out;
  }
  const index = indexByBindingGroup(grants);
  for (const s of r.scopes) {
    // Granted at s or above it; reaching the part of s's subtree the binding reaches.
    for (const at of [...ancestorsOf(s), s]) {
      for (const g of index.get(at) ?? []) {
        const capabilities = kept(g);
        if (capabilities.size === 0) continue;
        const reach = isWithin(s, g.scope) ? s : isWithin(g.scope, s) ? g.scope : undefined;
        if (reach !== undefined) out.push({ scope: reach, capabilities });
      }
    }
  }
  return out;
}
