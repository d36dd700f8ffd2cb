// The types the auth kernel's files share, in one file they all import (none of them imports another for a
// type). Among them what the auth kernel needs to know of identities and their grants, as an interface the
// IAM domain implements (src/iam/directory.ts). The kernel never reads IAM's tables: it asks the directory,
// so how identities, roles and bindings are stored stays IAM's business.
import type { Identity } from "../../../gen/chainguard/platform/iam/v2/identities_pb.js";
import type { Principal } from "./principal.js";

/** An identity as token verification sees it: its uid and how tokens assume it. */
export interface AssumableIdentity {
  uid: string;
  /** The relationship oneof; unset when the stored one cannot be read. */
  relationship: Identity["relationship"];
  /** The group the identity was created under; undefined for a root-level identity (a person). */
  homeGroup: string | undefined;
}

export interface IdentityDirectory {
  /**
   * The identity's home group and all its role bindings, each with its role's capabilities (none, and
   * `inactive`, while it is deactivated); undefined when the identity does not exist. Runs on every authenticated request that is not served from the grants
   * cache: one indexed query.
   */
  grants(identityUid: string): Promise<IdentityGrants | undefined>;

  /**
   * Up to `limit` active identities whose relationship names exactly this issuer and subject (a claim match with
   * exact issuer and subject, or static keys): the candidates for a token presented directly on an API call
   * or to an exchange naming no identity. Root-level identities first (only the operator makes them), then
   * the oldest first: an identity created later, in whatever organization, never displaces one before it.
   *
   * With `within` (a uid), only those that can act on it: root-level ones and those created under it or one
   * of its ancestors, root-level first, then the shallowest home group, then the oldest. Only whoever
   * administers those groups can add to them, so no other organization's identities push these out.
   */
  withIssuerAndSubject(issuer: string, subject: string, limit: number, within?: string): Promise<AssumableIdentity[]>;

  /** The identity `identityUid`, if it exists and is active: the one a token presented to the token exchange assumes. */
  assumable(identityUid: string): Promise<AssumableIdentity | undefined>;

  /** Records that the identity authenticated now, unless that was already recorded within `withinSeconds`. */
  markSeen(identityUid: string, withinSeconds: number): Promise<void>;
}

export interface Binding {
  groupUid: string;
  capabilities: readonly number[];
}

export interface IdentityGrants {
  /** The identity's home group (parent), or undefined for a root-level identity. */
  homeGroup: string | undefined;
  bindings: Binding[];
  /**
   * True while the identity is deactivated (an identity provider deprovisioned it over SCIM): it holds no
   * bindings, and the authenticator refuses its tokens.
   */
  inactive?: boolean;
}

/** The caller and its role bindings (read for this request, or remembered: see grants-cache.ts). */
export interface Authenticated {
  principal: Principal;
  bindings: Binding[];
}

/**
 * The identities a token acts as, best first (never none). For an external token, at most
 * MAX_CANDIDATE_IDENTITIES of those its issuer and subject match, and `within`: the ones that can act on a
 * given uid, verified on demand (however many other identities match: see createCandidateAccess).
 */
export type Candidates = Authenticated[] & { within?: (uid: string) => Promise<Authenticated[]> };
