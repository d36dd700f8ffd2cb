// Capability resolution. A role binding (identity, role, group) grants the role's capabilities on the group
// and everything beneath it. An identity created under a group is confined to that group's subtree: a
// binding on an ancestor counts only from the identity's home group down. The identity and its bindings are
// read together (one prepared, indexed query), and remembered between requests only until a grant changes
// (grants-cache.ts).
import { eq, sql } from "drizzle-orm";
import type { Capability } from "../../../gen/capabilities/capabilities_pb.js";
import type { Db } from "../../db/client.js";
import { identities, roleBindings, roles } from "../../db/schema/index.js";
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

/**
 * Reads an identity's home group and all its role bindings in one query; undefined when the identity does
 * not exist. Prepared once per database.
 */
export function createIdentityLoader(db: Db): (identityUid: string) => Promise<IdentityGrants | undefined> {
  const query = db
    .select({ parentUid: identities.parentUid, groupUid: roleBindings.groupUid, capabilities: roles.capabilities })
    .from(identities)
    .leftJoin(roleBindings, eq(roleBindings.identityUid, identities.uid))
    .leftJoin(roles, eq(roles.uid, roleBindings.roleUid))
    .where(eq(identities.uid, sql.placeholder("uid")))
    .prepare("auth_identity_grants");
  return async (identityUid) => {
    const rows = await query.execute({ uid: identityUid });
    if (rows.length === 0) return undefined;
    return {
      homeGroup: rows[0]!.parentUid ?? undefined,
      bindings: rows.flatMap((r) => (r.groupUid && r.capabilities ? [{ groupUid: r.groupUid, capabilities: r.capabilities }] : [])),
    };
  };
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
