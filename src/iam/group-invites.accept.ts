// apiserver.iam.v1.GroupInviteAcceptanceService: accepting a group invite (the v2 contract has no method for
// it, so it lives in this server's own package: proto/apiserver/iam/v1/group_invites.proto,
// POST /iam/v2/groupInvites:accept {"code": "..."}).
//
// Who may call: anyone with a verified bearer token of an issuer this server accepts. The method's rule is
// identity_optional (options.proto): a token that already assumes an identity is authenticated by the
// interceptor as usual; an external token that assumes none (the usual case: the invite is how a person
// gets an identity) passes with no access, and is verified here, with the keys its issuer's discovery names
// and an audience among EXTERNAL_AUDIENCES (kernel/auth/external.ts verifyAnyIssuer) -- but only once the
// code has named a live invite, so that an arbitrary `iss` cannot make the server call out.
//
// Any issuer is accepted (there is no list of trusted ones), so an invite's email is checked against what the
// token's issuer asserts: it keeps other accounts of a real provider out, not a code holder with an issuer of
// their own. The code is the credential.
//
// The caller is its token's issuer and subject; for a token of this server, the external token it was
// exchanged for (`act`), else this server's issuer and the identity uid (such an identity is then assumed by
// exchanging that token naming it).
//
// The invite is honoured only while the identity that made it could still make it: one that was deleted took
// its invites with it; one that is deactivated, or no longer holds the invite role's capabilities and
// GROUP_INVITES_CREATE and ROLE_BINDINGS_CREATE on the group, has its invites refused (group-invites.service.ts).
//
// What accepting does, in one transaction: the caller's identity in the invite's group (one directly in the
// group with a claim_match on exactly that issuer and subject), created when there is none (named from the
// token's name, preferred_username or email; its email when the token says it is verified); the binding of
// that identity to the invite's role on the group, created when it does not exist; and a single-use invite
// is deleted (concurrent accepts of one single-use code: the DELETE decides, exactly one wins; a multi-use
// invite's row is locked, so concurrent accepts by one person make one identity). The changes are recorded
// as the events of the methods that make them (identity created, role binding created, group invite
// deleted), with the caller's identity as the actor and this method as the one that emitted them.
//
// One refusal, PERMISSION_DENIED with reason INVITE_CODE_INVALID and the same message, for an unknown,
// expired or used-up code, for an invite naming an email the token does not carry verified, for a token
// that does not verify, and for a caller whose identity in the group a SCIM client deactivated: nothing
// tells a code that exists from one that does not. Refusals count against the caller's failure budget
// (kernel/rate-limit.ts: by address, and by token issuer and subject once the token has verified); a caller
// over it is refused with RESOURCE_EXHAUSTED before its code is looked at.
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { decodeJwt, type JWTPayload } from "jose";
import { AcceptGroupInviteResponseSchema, GroupInviteAcceptanceService } from "../../gen/apiserver/iam/v1/group_invites_pb.js";
import { GroupInvitesService } from "../../gen/chainguard/platform/iam/v2/group_invites_pb.js";
import { IdentitiesService } from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import { RoleBindingsService } from "../../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import type { IdentityRow } from "../db/schema/index.js";
import { Capability } from "../../gen/capabilities/capabilities_pb.js";
import type { GroupInviteRow } from "../db/schema/index.js";
import { createAccess, maybeAccessOf, presentedTokenKey } from "../kernel/auth/index.js";
import { canVerifyAnyIssuer } from "../kernel/auth/external.js";
import { registry } from "../kernel/descriptors.js";
import { failedPrecondition, invalidArgument, permissionDenied, unauthenticated } from "../kernel/errors/index.js";
import { log } from "../kernel/log.js";
import { callerOf, createFailureLimiter, DEFAULT_RATE_LIMITS, provenCaller } from "../kernel/rate-limit.js";
import type { Executor } from "../kernel/store.js";
import { runUnitOfWork, type EventedChange } from "../kernel/unit-of-work.js";
import { bindService, type ServiceBinding } from "../kernel/module.js";
import type { IamDeps } from "./deps.js";
import { inviteCodeHash, MAX_INVITE_CODE_LENGTH } from "./group-invite-code.js";
import { createGroupInviteStore } from "./group-invites.store.js";
import { identityFromToken, toIdentity } from "./identities.mapper.js";
import { createIdentityStore } from "./identities.store.js";
import { toRoleBinding } from "./role-bindings.mapper.js";
import { createRoleBindingStore } from "./role-bindings.store.js";
import { createRoleStore } from "./roles.store.js";

/** The one answer to every refused code (see the file comment). */
export const INVITE_REFUSED_REASON = "INVITE_CODE_INVALID";
const refused = () =>
  permissionDenied(
    "The invite code is not valid for this caller: it is unknown, expired or used up, or the invite is for another verified email address",
    INVITE_REFUSED_REASON,
  );

/** Why a code was refused, for the debug log only (never in the answer). */
class Refusal extends Error {}

const ACCEPT_PATH = `/${GroupInviteAcceptanceService.typeName}/${GroupInviteAcceptanceService.method.acceptGroupInvite.name}`;

/** Who accepts: the issuer and subject its identity will claim-match, and the verified claims of its token. */
interface Caller {
  issuer: string;
  subject: string;
  claims: JWTPayload;
}

/** Whether the token's claims carry `email` (lowercase), verified. */
function carriesVerifiedEmail(claims: JWTPayload, email: string): boolean {
  const verified = claims.email_verified === true || claims.email_verified === "true";
  return verified && typeof claims.email === "string" && claims.email.toLowerCase() === email;
}

export function groupInviteAcceptanceBindings(deps: IamDeps): ServiceBinding[] {
  const failures = createFailureLimiter({ what: "refused invite acceptances", ...(deps.rateLimits?.inviteFailures ?? DEFAULT_RATE_LIMITS.inviteFailures) });
  const { db } = deps;

  /** The caller, for a token the interceptor authenticated; undefined for one that assumes no identity yet. */
  const authenticatedCaller = (ctx: HandlerContext, token: string): Caller | undefined => {
    const access = maybeAccessOf(ctx);
    if (!access) return undefined;
    const p = access.principal;
    if (p.issuer === deps.issuerUrl) {
      // This server's own token: it carries no email; the person behind it is the token it was exchanged for.
      return { ...(p.upstream ?? { issuer: p.issuer, subject: p.subject }), claims: {} };
    }
    // An external token the authenticator verified (it assumes an identity somewhere): its claims are trusted.
    return { issuer: p.issuer, subject: p.subject, claims: decodeJwt(token) };
  };

  /** Verifies a token that assumes no identity (only once a live invite was found: see the file comment). */
  const verifiedCaller = async (token: string): Promise<Caller> => {
    const verifier = deps.external;
    if (!canVerifyAnyIssuer(verifier)) {
      throw failedPrecondition({ type: "ACCEPT_NOT_CONFIGURED", description: "this server has no verifier for external tokens" });
    }
    try {
      const v = await verifier.verifyAnyIssuer(token);
      return { issuer: v.issuer, subject: v.subject, claims: v.claims };
    } catch (err) {
      throw new Refusal("the token does not verify", { cause: err });
    }
  };

  /** Whether the invite's maker could still make it (see the file comment); invites made before it was recorded are kept. */
  const makerStillGrants = async (tx: Executor, invite: GroupInviteRow): Promise<boolean> => {
    if (!invite.creatorUid) return true;
    const grants = await deps.grants(invite.creatorUid);
    if (!grants || grants.inactive) return false;
    const [role] = await createRoleStore(tx).findShared([invite.roleUid]);
    if (!role) return false;
    const maker = createAccess({ identityUid: invite.creatorUid, homeGroup: grants.homeGroup, issuer: "", subject: "" }, grants.bindings);
    return maker.holds(invite.groupUid, [Capability.CAP_IAM_GROUP_INVITES_CREATE, Capability.CAP_IAM_ROLE_BINDINGS_CREATE, ...(role.capabilities as Capability[])]);
  };

  /** What one acceptance changed, as the methods making the same changes describe it (for their events). */
  const acceptChanges = async (tx: Executor, change: { identity?: IdentityRow | undefined; binding?: string | undefined; deletedInvite?: string | undefined }) => {
    const changes: EventedChange[] = [];
    if (change.identity) changes.push({ method: IdentitiesService.method.createIdentity, response: toIdentity(change.identity) });
    if (change.binding) {
      for (const b of await createRoleBindingStore(tx).findHydratedMany([change.binding])) {
        changes.push({ method: RoleBindingsService.method.createRoleBinding, response: toRoleBinding(b) });
      }
    }
    if (change.deletedInvite) {
      const method = GroupInvitesService.method.deleteGroupInvite;
      changes.push({ method, request: create(method.input, { uid: change.deletedInvite }) });
    }
    return changes;
  };

  /** `attempt.verified` is set once the token has verified (the interceptor's, or verifiedCaller). */
  const accept = async (ctx: HandlerContext, token: string, code: string, attempt: { verified: boolean }) => {
    if (code.length > MAX_INVITE_CODE_LENGTH) throw new Refusal("code too long");
    const known = authenticatedCaller(ctx, token);
    attempt.verified = known !== undefined;
    const invite = await createGroupInviteStore(db).findLive(inviteCodeHash(code));
    if (!invite) throw new Refusal("no live invite has this code");
    const caller = known ?? (await verifiedCaller(token));
    attempt.verified = true;
    if (invite.email !== "" && !carriesVerifiedEmail(caller.claims, invite.email)) throw new Refusal("the token does not carry the invite's email, verified");
    // Before the transaction: the maker's grants are read as the authenticator reads them (the grants cache).
    if (!(await makerStillGrants(db, invite))) throw new Refusal("the invite's maker is deactivated or no longer holds what making it needed");

    // A unit of work (kernel/unit-of-work.ts); the remembered grants are forgotten by the authorization
    // interceptor, as after every IAM write.
    const done = await runUnitOfWork({ db, registry, signal: ctx.signal }, async (unit) => {
      const { tx } = unit;
      if (!(await createGroupInviteStore(tx).claim(invite))) throw new Refusal("the invite was used up or deleted meanwhile");
      const identityStore = createIdentityStore(tx);
      const found = await identityStore.findOrCreateBound({
        find: () => identityStore.lockClaimMatchIn(invite.groupUid, caller.issuer, caller.subject),
        insert: () => identityStore.insertForToken(invite.groupUid, identityFromToken(caller)),
        group: invite.groupUid,
        role: invite.roleUid,
        bindFound: true,
      });
      // Deactivated by its provider: accepting an invite does not bring it back, nor make another beside it.
      if (!found.binding) throw new Refusal("the caller's identity in the group is deactivated");
      const { created, binding } = found;
      const changes = await acceptChanges(tx, {
        identity: created,
        binding: binding.created ? binding.uid : undefined,
        deletedInvite: invite.singleUse ? invite.uid : undefined,
      });
      unit.record(changes, { actor: found.uid, source: ACCEPT_PATH });
      return { identityUid: found.uid, roleBindingUid: binding.uid, created: created !== undefined };
    });
    if (done.created) log.info("identity created by accepting an invite", { identity: done.identityUid, invite: invite.uid });
    return create(AcceptGroupInviteResponseSchema, { identityUid: done.identityUid, roleBindingUid: done.roleBindingUid, groupUid: invite.groupUid, roleUid: invite.roleUid });
  };

  const impl: ServiceImpl<typeof GroupInviteAcceptanceService> = {
    async acceptGroupInvite(req, ctx) {
      // The interceptor (identity_optional) has checked a bearer token is present and well-formed.
      const token = ctx.values.get(presentedTokenKey);
      if (token === undefined) throw unauthenticated("This method needs an Authorization: Bearer <token> header", "TOKEN_MISSING");
      const who = callerOf(ctx, token);
      failures.check(who);
      if (req.code === "") throw invalidArgument({ field: "code", description: "is required" });
      const attempt = { verified: false };
      try {
        return await accept(ctx, token, req.code, attempt);
      } catch (err) {
        if (err instanceof Refusal) {
          log.debug("invite acceptance refused", { why: err.message, cause: err.cause });
          failures.failed(provenCaller(who, attempt.verified));
          throw refused();
        }
        if (err instanceof ConnectError && err.code === Code.Unauthenticated) failures.failed(provenCaller(who, attempt.verified));
        throw err;
      }
    },
  };

  return [bindService(GroupInviteAcceptanceService, impl)];
}
