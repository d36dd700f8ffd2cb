// Group invite rows -> chainguard.platform.iam.v2.GroupInvite messages. The code is never in a row: only
// CreateGroupInvite sets it, on the message it answers.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { Capability } from "../../gen/capabilities/capabilities_pb.js";
import { GroupInviteSchema, type GroupInvite } from "../../gen/chainguard/platform/iam/v2/group_invites_pb.js";
import type { GroupInviteRow, RoleRow } from "../db/schema/index.js";

export function toGroupInvite(row: GroupInviteRow, role: RoleRow | undefined): GroupInvite {
  return create(GroupInviteSchema, {
    uid: row.uid,
    roleUid: row.roleUid,
    role: role && { uid: role.uid, name: role.name, description: role.description, capabilities: role.capabilities as Capability[] },
    email: row.email,
    expirationTime: timestampFromDate(row.expirationTime),
    singleUse: row.singleUse,
    keyId: row.keyId,
    createTime: timestampFromDate(row.createTime),
  });
}
