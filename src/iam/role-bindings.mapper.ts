// Hydrated role binding rows -> chainguard.platform.iam.v2.RoleBinding messages.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { RoleBindingSchema, type RoleBinding } from "../../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import type { HydratedRoleBindingRow } from "../db/schema/index.js";

export function toRoleBinding(row: HydratedRoleBindingRow): RoleBinding {
  return create(RoleBindingSchema, {
    uid: row.uid,
    identityUid: row.identityUid,
    roleUid: row.roleUid,
    identity: {
      uid: row.identityUid,
      name: row.identityName,
      description: row.identityDescription,
      subject: row.identitySubject ?? "",
      issuer: row.identityIssuer ?? "",
      email: row.identityEmail,
    },
    group: { uid: row.groupUid, name: row.groupName, description: row.groupDescription },
    role: { uid: row.roleUid, name: row.roleName, description: row.roleDescription },
    createTime: timestampFromDate(row.createTime),
    updateTime: timestampFromDate(row.updateTime),
  });
}
