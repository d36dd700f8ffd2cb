// GroupInvitesService: invitations that let a person join a group with a role. An invite is a promised role
// binding, so creating one follows the rules of creating a binding (role-bindings.rules.ts, roles.rules.ts).
// Accepting one is group-invites.accept.ts (this server's own method: the contract has none).
//
// Decisions:
// - Create needs CAP_IAM_GROUP_INVITES_CREATE and CAP_IAM_ROLE_BINDINGS_CREATE on the parent (the
//   interceptor), and every capability of the role on the parent (no escalation: PERMISSION_DENIED).
// - role_uid: a managed role or a custom role of the group or of one of its ancestors, existing (share-locked
//   against a concurrent change of its capabilities); else INVALID_ARGUMENT on group_invite.role_uid.
// - email: optional; when given, a plain address (local@domain, at most 254 characters), stored lowercase;
//   only a token carrying that email, verified, can accept the invite.
// - ttl: required (input only), more than 0 and at most 30 days; it sets expiration_time = now + ttl.
// - code (group-invite-code.ts): returned by Create only; stored as its sha256; empty in Get, List and in the
//   created event (debug_redact). key_id is the code's public part (see group-invite-code.ts).
// - List: uidp, key_id (exact, 16 hex), the common parameters; default order newest first.
// - An invite is immutable (the contract has no update). A single-use invite is deleted when accepted.
// - The identity that made it is recorded (not part of the contract message). Deleting that identity deletes
//   its invites; while it is deactivated, or no longer holds what making the invite needed (the role's
//   capabilities, GROUP_INVITES_CREATE and ROLE_BINDINGS_CREATE on the group), the invite is refused at
//   acceptance (group-invites.accept.ts): a promise of a binding is kept only while its maker could still
//   make that binding.
import { create } from "@bufbuild/protobuf";
import type { Duration } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  GroupInviteSchema,
  GroupInvitesService,
  ListGroupInvitesResponseSchema,
} from "../../gen/chainguard/platform/iam/v2/group_invites_pb.js";
import { accessOf, listScopesOf } from "../kernel/auth/index.js";
import { invalidArgument, throwIfAny, type FieldViolation } from "../kernel/errors/index.js";
import { defineListSpec, pageFields } from "../kernel/list/index.js";
import { storeFactory } from "../kernel/unit-of-work.js";
import { newChildUid } from "../kernel/uidp.js";
import { bindService, type ServiceBinding } from "../kernel/module.js";
import type { IamDeps } from "./deps.js";
import { inviteCodeHash, KEY_ID_PATTERN, newInviteCode } from "./group-invite-code.js";
import { toGroupInvite } from "./group-invites.mapper.js";
import { createGroupInviteStore } from "./group-invites.store.js";
import { roleViolations } from "./role-bindings.rules.js";
import { requireNoEscalation } from "./roles.rules.js";
import { createRoleStore } from "./roles.store.js";

/** The longest ttl of an invite. */
export const MAX_INVITE_TTL_MS = 30 * 24 * 3_600_000;
/** The longest email address (RFC 5321's path limit). */
const MAX_EMAIL_LENGTH = 254;
/** One "@", something before it, a dotted domain after it, no spaces: what can be checked without mailing. */
const EMAIL = /^[^\s@]+@[^\s@.]+(\.[^\s@.]+)+$/;

export const groupInviteListSpec = defineListSpec({
  name: "iam.v2.ListGroupInvites",
  message: GroupInviteSchema,
  orderBy: ["create_time", "expiration_time"],
  defaultOrder: "create_time desc",
});

/** The ttl in ms, or violations. */
function ttlOf(ttl: Duration | undefined): { ms: number } | { violations: FieldViolation[] } {
  const field = "group_invite.ttl";
  if (!ttl) return { violations: [{ field, description: "is required" }] };
  const ms = Number(ttl.seconds) * 1000 + Math.trunc(ttl.nanos / 1e6);
  if (ttl.seconds < 0n || ttl.nanos < 0 || ms <= 0) return { violations: [{ field, description: "must be positive" }] };
  if (ms > MAX_INVITE_TTL_MS) return { violations: [{ field, description: "must be at most 30 days" }] };
  return { ms };
}

function emailViolations(email: string): FieldViolation[] {
  if (email === "") return [];
  if (email.length > MAX_EMAIL_LENGTH || !EMAIL.test(email)) return [{ field: "group_invite.email", description: "is not an email address" }];
  return [];
}

export function groupInvitesBindings(deps: IamDeps): ServiceBinding[] {
  const invites = storeFactory(deps.db, createGroupInviteStore);
  const roles = storeFactory(deps.db, createRoleStore);

  const impl: ServiceImpl<typeof GroupInvitesService> = {
    async createGroupInvite(req, ctx) {
      // parent: checked by the interceptor (GROUP_INVITES_CREATE and ROLE_BINDINGS_CREATE).
      const invite = req.groupInvite;
      if (!invite) throw invalidArgument({ field: "group_invite", description: "is required" });
      const ttl = ttlOf(invite.ttl);
      throwIfAny([
        ...roleViolations(invite.roleUid, "group_invite.role_uid", req.parent),
        ...emailViolations(invite.email),
        ...("violations" in ttl ? ttl.violations : []),
      ]);
      const held = await accessOf(ctx).capabilitiesAt(req.parent);
      const [role] = await roles(ctx).findShared([invite.roleUid]);
      if (!role) throw invalidArgument({ field: "group_invite.role_uid", description: "does not name an existing role" });
      requireNoEscalation(held, role.capabilities, req.parent, `invite role ${JSON.stringify(role.uid)}`);
      const { code, keyId } = newInviteCode();
      const [row] = await invites(ctx).insert(req.parent, [
        {
          uid: newChildUid(req.parent),
          groupUid: req.parent,
          roleUid: role.uid,
          email: invite.email.toLowerCase(),
          expirationTime: new Date(Date.now() + (ttl as { ms: number }).ms),
          singleUse: invite.singleUse,
          codeHash: inviteCodeHash(code),
          keyId,
          creatorUid: accessOf(ctx).principal.identityUid,
        },
      ]);
      const created = toGroupInvite(row!, role);
      created.code = code;
      return created;
    },

    async getGroupInvite(req, ctx) {
      // uid: checked by the interceptor (GROUP_INVITES_LIST).
      const row = await invites(ctx).get(req.uid);
      return toGroupInvite(row, (await invites(ctx).rolesOf([row])).get(row.roleUid));
    },

    async deleteGroupInvite(req, ctx) {
      // uid: checked by the interceptor (GROUP_INVITES_DELETE).
      await invites(ctx).remove(req.uid);
      return {};
    },

    async listGroupInvites(req, ctx) {
      if (req.keyId !== "" && !KEY_ID_PATTERN.test(req.keyId)) throw invalidArgument({ field: "key_id", description: "must be 16 lowercase hex characters" });
      const scopes = await listScopesOf(ctx);
      const page = await invites(ctx).list(deps.lists.plan(req, groupInviteListSpec, scopes), { scopes, uidp: req.uidp, keyId: req.keyId });
      const byUid = await invites(ctx).rolesOf(page.rows);
      return create(ListGroupInvitesResponseSchema, { groupInvites: page.rows.map((r) => toGroupInvite(r, byUid.get(r.roleUid))), ...pageFields(page) });
    },
  };

  return [bindService(GroupInvitesService, impl)];
}
