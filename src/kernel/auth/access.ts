// Capability resolution. A role binding (identity, role, group) grants the role's capabilities on the group
// and everything beneath it. An identity created under a group is confined to that group's subtree: a
// binding on an ancestor counts only from the identity's home group down. The identity and its bindings come
// from the IdentityDirectory (directory.ts), and are remembered between requests only until a grant changes
// (grants-cache.ts).
import type { Capability } from "../../../gen/capabilities/capabilities_pb.js";
import { permissionDenied } from "../errors/index.js";
import { isWithin } from "../uidp.js";
import type { Access, Principal } from "./principal.js";

/** One role binding of the caller: the group it is on and the capabilities of its role. */
export interface Binding {
  groupUid: string;
  capabilities: readonly number[];
}

export interface IdentityGrants {
  /** The identity's home group (parent), or undefined for a root-level identity. */
  homeGroup: string | undefined;
  bindings: Binding[];
}

interface Grant {
  /** Where the grant applies: the bound group, narrowed to the identity's home group. */
  scope: string;
  capabilities: ReadonlySet<number>;
}

/** A binding's reach for a confined identity: the part of its subtree inside the home group, if any. */
export function effectiveScope(bindingGroup: string, homeGroup: string | undefined): string | undefined {
  if (!homeGroup) return bindingGroup;
  if (isWithin(homeGroup, bindingGroup)) return homeGroup; // bound at or above home: reaches home's subtree
  if (isWithin(bindingGroup, homeGroup)) return bindingGroup; // bound beneath home
  return undefined; // elsewhere: never reaches
}

/** Removes scopes nested inside another scope of the list. */
export function outermost(scopes: Iterable<string>): string[] {
  const sorted = [...new Set(scopes)].sort((a, b) => a.length - b.length);
  const out: string[] = [];
  for (const s of sorted) if (!out.some((o) => isWithin(s, o))) out.push(s);
  return out.sort();
}

export function createAccess(principal: Principal, bindings: readonly Binding[]): Access {
  const grants: Grant[] = bindings.flatMap((b) => {
    const scope = effectiveScope(b.groupUid, principal.homeGroup);
    return scope ? [{ scope, capabilities: new Set(b.capabilities) }] : [];
  });
  const capabilitiesAt = async (uid: string): Promise<ReadonlySet<Capability>> => {
    const held = new Set<Capability>();
    for (const g of grants) {
      if (isWithin(uid, g.scope)) for (const c of g.capabilities) held.add(c as Capability);
    }
    return held;
  };

  const holds = async (uid: string, capabilities: readonly Capability[]): Promise<boolean> => {
    const held = await capabilitiesAt(uid);
    return capabilities.every((c) => held.has(c));
  };

  return {
    principal,
    capabilitiesAt,
    holds,
    async require(uid, capabilities) {
      if (!(await holds(uid, capabilities))) {
        throw permissionDenied(`Permission denied: the caller lacks the capabilities this method needs on ${JSON.stringify(uid)}`);
      }
    },
    async visibleScopes(capabilities) {
      // Capabilities held at a scope can come from several bindings; combine per scope root first.
      const all = grants;
      const candidates = new Set(all.map((g) => g.scope));
      const visible = [...candidates].filter((scope) =>
        capabilities.every((c) => all.some((g) => isWithin(scope, g.scope) && g.capabilities.has(c))),
      );
      return outermost(visible);
    },
  };
}
