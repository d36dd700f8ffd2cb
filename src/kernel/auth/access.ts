// Capability resolution. A role binding (identity, role, group) grants the role's capabilities on the group
// and everything beneath it. An identity created under a group is confined to that group's subtree: a
// binding on an ancestor counts only from the identity's home group down. The identity and its bindings come
// from the IdentityDirectory (directory.ts), and are remembered between requests only until a grant changes
// (grants-cache.ts).
//
// A token of this server minted by a down-scoping exchange (its `scopes` and `cap`) holds only part of its
// identity's grants: every check below (scoped, capabilitiesAt, visibleScopes) sees only that part
// (restriction.ts).
//
// A token can act as several identities: an external token whose issuer and subject several organizations
// gave an identity to (each organization may do so, and none may lock the others out). Each call then acts
// as ONE of them, never as their union, so no combination of grants ever exceeds what one identity holds
// (createCandidateAccess).
import { Capability } from "../../../gen/capabilities/capabilities_pb.js";
import { failedPrecondition, permissionDenied } from "../errors/index.js";
import { ancestorsOf, isWithin } from "../uidp.js";
import type { Access, Principal } from "./principal.js";
import type { Authenticated, Binding, Candidates } from "./types.js";
import { isUnrestricted, restrictGrants, type RestrictableGrant } from "./restriction.js";

/** One role binding of the caller: the group it is on and the capabilities of its role. */
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

/**
 * Removes scopes nested inside another scope of the list; sorted. Linear in the number of scopes (times
 * their depth): a scope is kept unless one of its proper ancestors is in the list.
 */
export function outermost(scopes: Iterable<string>): string[] {
  const all = new Set(scopes);
  const out: string[] = [];
  for (const s of all) if (!ancestorsOf(s).some((a) => all.has(a))) out.push(s);
  return out.sort();
}

/**
 * Grants indexed by scope: each scope's capabilities (every grant on it, united). What is held on a uid is
 * found by one lookup per ancestor of the uid (and the uid itself), however many grants there are.
 */
export class GrantIndex {
  readonly #byScope = new Map<string, Set<number>>();
  readonly #visible = new Map<string, readonly string[]>();

  constructor(grants: Iterable<Grant>) {
    for (const g of grants) {
      const held = this.#byScope.get(g.scope);
      if (held) for (const c of g.capabilities) held.add(c);
      else this.#byScope.set(g.scope, new Set(g.capabilities));
    }
  }

  /** The capability sets of the scopes `uid` lies within (the uid itself and its ancestors). */
  #reaching(uid: string): Set<number>[] {
    const out: Set<number>[] = [];
    for (let i = uid.indexOf("/"); i >= 0; i = uid.indexOf("/", i + 1)) {
      const held = this.#byScope.get(uid.slice(0, i));
      if (held) out.push(held);
    }
    const own = this.#byScope.get(uid);
    if (own) out.push(own);
    return out;
  }

  capabilitiesAt(uid: string): Set<Capability> {
    const held = new Set<Capability>();
    for (const caps of this.#reaching(uid)) for (const c of caps) held.add(c as Capability);
    return held;
  }

  holds(uid: string, capabilities: readonly Capability[]): boolean {
    const reaching = this.#reaching(uid);
    return capabilities.every((c) => reaching.some((caps) => caps.has(c)));
  }

  /** The outermost scopes where every one of `capabilities` is held; remembered per set of capabilities. */
  visibleScopes(capabilities: readonly Capability[]): readonly string[] {
    const key = [...new Set(capabilities)].sort((a, b) => a - b).join(",");
    let visible = this.#visible.get(key);
    if (!visible) {
      // Capabilities held at a scope can come from several grants (on it and its ancestors): combined by holds.
      visible = outermost([...this.#byScope.keys()].filter((scope) => this.holds(scope, capabilities)));
      this.#visible.set(key, visible);
    }
    return visible;
  }
}

/** PERMISSION_DENIED for a caller without the capabilities a method needs on `uid`. */
function lacksCapabilities(uid: string) {
  return permissionDenied(`Permission denied: the caller lacks the capabilities this method needs on ${JSON.stringify(uid)}`);
}

/**
 * The grants of a list of bindings for an identity with this home group, made once per list: the grants
 * cache hands every call of an identity the same list until one of its grants changes. With them, their
 * index for each restriction calls came with (none: the unrestricted one), so a call looks up what it holds
 * instead of building it.
 */
interface GrantsOfHome {
  grants: RestrictableGrant[];
  indexes: Map<string, GrantIndex>;
}
const grantsByBindings = new WeakMap<readonly Binding[], Map<string | undefined, GrantsOfHome>>();
/** The most restricted indexes kept per list of bindings (distinct restrictions of one identity's tokens). */
const MAX_INDEXES_PER_BINDINGS = 64;

function grantsOfHome(bindings: readonly Binding[], homeGroup: string | undefined): GrantsOfHome {
  let byHome = grantsByBindings.get(bindings);
  if (!byHome) grantsByBindings.set(bindings, (byHome = new Map()));
  let entry = byHome.get(homeGroup);
  if (!entry) {
    const grants = bindings.flatMap((b) => {
      const scope = effectiveScope(b.groupUid, homeGroup);
      return scope ? [{ scope, capabilities: new Set(b.capabilities), bindingGroup: b.groupUid }] : [];
    });
    entry = { grants, indexes: new Map() };
    byHome.set(homeGroup, entry);
  }
  return entry;
}

/** The index of what a principal holds with these bindings: its identity's grants, less its token's restriction. */
function grantIndexOf(principal: Principal, bindings: readonly Binding[]): GrantIndex {
  const entry = grantsOfHome(bindings, principal.homeGroup);
  const r = principal.restriction;
  const key = isUnrestricted(r) ? "" : JSON.stringify([r!.scopes ?? null, r!.capabilities ?? null]);
  let index = entry.indexes.get(key);
  if (!index) {
    // A down-scoped token (the exchange's scopes and cap) keeps only part of its identity's grants.
    index = new GrantIndex(key === "" ? entry.grants : restrictGrants(entry.grants, r!));
    if (entry.indexes.size >= MAX_INDEXES_PER_BINDINGS) entry.indexes.clear();
    entry.indexes.set(key, index);
  }
  return index;
}

export function createAccess(principal: Principal, bindings: readonly Binding[]): Access {
  const index = grantIndexOf(principal, bindings);
  const holds = async (uid: string, capabilities: readonly Capability[]): Promise<boolean> => index.holds(uid, capabilities);
  return {
    principal,
    actingAs: principal.identityUid,
    capabilitiesAt: async (uid) => index.capabilitiesAt(uid),
    holds,
    async require(uid, capabilities) {
      if (!(await holds(uid, capabilities))) {
        throw lacksCapabilities(uid);
      }
    },
    visibleScopes: async (capabilities) => index.visibleScopes(capabilities),
  };
}

/**
 * The identity a token acts as when nothing names one (no scope, no `identity`): the only candidate, or the
 * only root-level one (a person the operator bootstrapped: no organization can create one, so none can
 * take this place). Undefined when that leaves a choice to the caller.
 */
export function soleCandidate<T>(candidates: readonly T[], isRootLevel: (c: T) => boolean): T | undefined {
  if (candidates.length === 1) return candidates[0];
  const roots = candidates.filter(isRootLevel);
  return roots.length === 1 ? roots[0] : undefined;
}

/**
 * The candidates their holder could already see: root-level ones (a person's own, which only the operator
 * makes), and those on whose uid one of the candidates holds CAP_IAM_IDENTITY_LIST. An organization that
 * gave the token an identity the token's holder cannot read keeps it to itself.
 */
export function visibleCandidates<T extends Authenticated>(candidates: readonly T[]): T[] {
  const indexes = candidates.map((c) => grantIndexOf({ ...c.principal, restriction: undefined }, c.bindings));
  return candidates.filter(
    (c) => c.principal.homeGroup === undefined || indexes.some((index) => index.holds(c.principal.identityUid, [Capability.CAP_IAM_IDENTITY_LIST])),
  );
}

/**
 * The identity a token acts as when nothing names one: soleCandidate's choice, else the only one its holder
 * could see (visibleCandidates), so identities another organization made for the same issuer and subject
 * never make the choice ambiguous. Otherwise FAILED_PRECONDITION (identityAmbiguous) naming the ones the
 * holder could see, with `what` telling how to choose.
 */
export function chooseCandidate<T extends Authenticated>(candidates: readonly T[], what: string): T {
  const sole = soleCandidate(candidates, (c) => c.principal.homeGroup === undefined);
  if (sole) return sole;
  const visible = visibleCandidates(candidates);
  if (visible.length === 1) return visible[0]!;
  throw identityAmbiguous(
    visible.map((c) => c.principal.identityUid),
    what,
  );
}

/**
 * FAILED_PRECONDITION naming, one violation each, the identities the token may act as, so the caller
 * chooses (the token exchange's `identity`); with none to name, one violation saying so.
 */
export function identityAmbiguous(identityUids: readonly string[], what: string) {
  return failedPrecondition(
    identityUids.length === 0
      ? [{ type: "IDENTITY_AMBIGUOUS", subject: "", description: `several identities have the token's issuer and subject; ${what}` }]
      : identityUids.map((uid) => ({
          type: "IDENTITY_AMBIGUOUS",
          subject: uid,
          description: `the token may act as identity ${uid}; ${what}`,
        })),
    "IDENTITY_AMBIGUOUS",
  );
}

/**
 * The access of a token that acts as the candidates (best first; see IdentityDirectory.withIssuerAndSubject).
 * With one candidate, and no others to look for (`within`), that identity's. Otherwise each call acts as
 * one, chosen by the first check that names a uid (the scoped rule's scope in the interceptor, or a
 * handler's require, holds, capabilitiesAt): the first candidate whose grants cover it, kept for the rest of
 * the call. When none of the candidates covers it and the token may match more identities than were read,
 * `within(uid)` reads the ones that can act on that uid (created under it or an ancestor: however many
 * identities other organizations made for the same issuer and subject, they are not among them), and the
 * first of those that covers it is chosen. Before any such check:
 *   visibleScopes   what any one candidate could list (each row listed is one some candidate may read alone)
 *   principal       chooseCandidate's choice; otherwise FAILED_PRECONDITION naming the candidates the
 *                   holder could see ("which group is mine", "my metadata" cannot be answered for several
 *                   identities at once)
 */
export function createCandidateAccess(candidates: Candidates | readonly Authenticated[]): Access {
  const within = (candidates as Candidates).within;
  if (candidates.length === 1 && !within) return createAccess(candidates[0]!.principal, candidates[0]!.bindings);
  return new CandidateAccess(candidates, within);
}

/**
 * createCandidateAccess's access over several candidates. A class, its getters on the prototype: an object
 * literal's getter keeps its closure, and the call's objects it reaches, alive through V8's young-generation
 * collections (kernel/invoke.ts, InProcessRequest).
 */
class CandidateAccess implements Access {
  #chosen: Access | undefined;
  readonly all: readonly Access[];

  constructor(
    private readonly candidates: readonly Authenticated[],
    private readonly within: ((uid: string) => Promise<Authenticated[]>) | undefined,
  ) {
    this.all = candidates.map((c) => createAccess(c.principal, c.bindings));
  }

  async #choose(uid: string, test: (a: Access) => Promise<boolean>): Promise<Access | undefined> {
    if (this.#chosen) return this.#chosen;
    for (const a of this.all) if (await test(a)) return (this.#chosen = a);
    if (!this.within) return undefined;
    const tried = new Set(this.candidates.map((c) => c.principal.identityUid));
    for (const c of await this.within(uid)) {
      if (tried.has(c.principal.identityUid)) continue;
      const a = createAccess(c.principal, c.bindings);
      if (await test(a)) return (this.#chosen = a);
    }
    return undefined;
  }

  get principal(): Principal {
    if (this.#chosen) return this.#chosen.principal;
    const chosen = chooseCandidate(
      this.candidates,
      "this call names no group to choose by: exchange the token for the identity to use (Exchange with identity)",
    );
    return (this.#chosen = this.all[this.candidates.indexOf(chosen)]!).principal;
  }

  get actingAs(): string | undefined {
    return this.#chosen?.principal.identityUid;
  }

  async capabilitiesAt(uid: string): Promise<ReadonlySet<Capability>> {
    const a = await this.#choose(uid, async (a) => (await a.capabilitiesAt(uid)).size > 0);
    return a ? a.capabilitiesAt(uid) : new Set<Capability>();
  }

  async holds(uid: string, capabilities: readonly Capability[]): Promise<boolean> {
    if (this.#chosen) return this.#chosen.holds(uid, capabilities);
    return (await this.#choose(uid, (a) => a.holds(uid, capabilities))) !== undefined;
  }

  async require(uid: string, capabilities: readonly Capability[]): Promise<void> {
    if (!(await this.holds(uid, capabilities))) {
      throw lacksCapabilities(uid);
    }
  }

  async visibleScopes(capabilities: readonly Capability[]): Promise<readonly string[]> {
    if (this.#chosen) return this.#chosen.visibleScopes(capabilities);
    return outermost((await Promise.all(this.all.map((a) => a.visibleScopes(capabilities)))).flat());
  }
}
