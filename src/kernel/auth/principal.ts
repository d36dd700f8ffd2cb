// Who is calling, and what they may do: set by the auth interceptor on every authenticated call, read by
// handlers through accessOf(ctx).
import { createContextKey, type HandlerContext } from "@connectrpc/connect";
import { Capability } from "../../../gen/capabilities/capabilities_pb.js";
import { permissionDenied, unauthenticated } from "../errors/index.js";
import { isUnrestricted, type TokenRestriction } from "./restriction.js";

export interface Principal {
  /** The identity the caller acts as. */
  identityUid: string;
  /**
   * The group the identity was created under; its capabilities never reach outside that subtree. Undefined
   * for a root-level identity (a person, created by bootstrap), which is limited by its bindings only.
   */
  homeGroup: string | undefined;
  /** Issuer and subject of the token presented. */
  issuer: string;
  subject: string;
  /** For a token this service minted by exchange: the issuer and subject of the token exchanged. */
  upstream?: { issuer: string; subject: string } | undefined;
  /** For a token minted by a down-scoping exchange: what it is restricted to (restriction.ts). */
  restriction?: TokenRestriction | undefined;
}

export interface Access {
  readonly principal: Principal;
  /**
   * The uid of the identity the call acts as when that is settled, else undefined; unlike `principal` it
   * never throws (for logs and metrics, read after the call whatever its outcome).
   */
  readonly actingAs: string | undefined;
  /** Capabilities the principal holds on `uid` (a group, or a resource inside one). */
  capabilitiesAt(uid: string): Promise<ReadonlySet<Capability>>;
  /** Whether the principal holds every one of `capabilities` on `uid`. */
  holds(uid: string, capabilities: readonly Capability[]): Promise<boolean>;
  /** Throws PERMISSION_DENIED unless the principal holds every one of `capabilities` on `uid`. */
  require(uid: string, capabilities: readonly Capability[]): Promise<void>;
  /**
   * The roots of the subtrees where the principal holds every one of `capabilities`: an unscoped List
   * returns only rows whose uid is one of these or lies beneath one (see scopePredicate).
   */
  visibleScopes(capabilities: readonly Capability[]): Promise<readonly string[]>;
}

export const accessKey = createContextKey<Access | undefined>(undefined, { description: "caller access" });
/** The capabilities an unscoped method's auth rule names (set by the auth interceptor). */
export const ruleCapabilitiesKey = createContextKey<readonly Capability[]>([], { description: "capabilities of the method's auth rule" });

/**
 * The bearer token of a call to a method whose rule is identity_optional (set by the auth interceptor,
 * whether or not the token assumed an identity).
 */
export const presentedTokenKey = createContextKey<string | undefined>(undefined, { description: "the bearer token, for identity_optional methods" });

/** The caller's access when it has one: on an identity_optional method, a caller with no identity has none. */
export function maybeAccessOf(ctx: HandlerContext): Access | undefined {
  return ctx.values.get(accessKey);
}

/** The caller's access; every method whose rule is not `disabled` has one (but see identity_optional). */
export function accessOf(ctx: HandlerContext): Access {
  const access = ctx.values.get(accessKey);
  if (!access) throw unauthenticated("This method needs an authenticated caller");
  return access;
}

/**
 * The capabilities the method's auth rule names, for an unscoped method that checks them itself; a rule
 * naming none has nothing to check by, and calling this from one is a programming error.
 */
function ruleCapabilitiesOf(ctx: HandlerContext): readonly Capability[] {
  const capabilities = ctx.values.get(ruleCapabilitiesKey);
  if (capabilities.length === 0) throw new Error(`${ctx.method.parent.typeName}.${ctx.method.name}: its auth rule names no capability`);
  return capabilities;
}

/**
 * The scopes an unscoped List shows its caller: the roots of the subtrees where the caller holds every
 * capability the method's auth rule names (so the rule is stated once, in the proto).
 */
export function listScopesOf(ctx: HandlerContext): Promise<readonly string[]> {
  return accessOf(ctx).visibleScopes(ruleCapabilitiesOf(ctx));
}

/**
 * Throws PERMISSION_DENIED unless the caller holds, on `uid`, every capability the method's auth rule names:
 * for an unscoped method whose scope only the handler can tell (a create that may name no parent, a role
 * that may be managed or custom). Checked before anything is read, as the interceptor does for scoped ones.
 */
export function requireRuleAt(ctx: HandlerContext, uid: string): Promise<void> {
  return accessOf(ctx).require(uid, ruleCapabilitiesOf(ctx));
}

/**
 * Throws PERMISSION_DENIED unless the caller holds every capability the method's auth rule names somewhere:
 * for an unscoped method over global data (not per organization), where a grant on any group suffices.
 */
export async function requireRuleAnywhere(ctx: HandlerContext): Promise<void> {
  if ((await listScopesOf(ctx)).length === 0) {
    throw permissionDenied(`This method needs ${ruleCapabilitiesOf(ctx).map((c) => Capability[c]).join(", ")} on some group`);
  }
}

/**
 * Throws PERMISSION_DENIED for a down-scoped token (restricted by group or capability): the actions that name
 * no group and need no capability (creating an organization, asking for access to a group) are beyond
 * whatever such a token was restricted to.
 */
export function requireUnrestricted(principal: Principal, what: string): void {
  if (!isUnrestricted(principal.restriction)) {
    throw permissionDenied(`Permission denied: ${what} needs a token that is not restricted to groups or capabilities (exchange without scopes and cap)`, "TOKEN_RESTRICTED");
  }
}
