// Hydrated role binding rows -> chainguard.platform.iam.v2.RoleBinding messages.
import type { RoleBinding } from "../../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import type { HydratedRoleBindingRow } from "../db/schema/index.js";
import { timestampOf } from "../kernel/timestamp.js";

/**
 * The row as the message, every field set: plain message objects (protobuf-es 2 messages are plain objects),
 * where create() would walk the schema of the binding and of its three nested messages for each row of a page.
 */
export function toRoleBinding(row: HydratedRoleBindingRow): RoleBinding {
  return {
    $typeName: "chainguard.platform.iam.v2.RoleBinding",
    uid: row.uid,
    identity: {
      $typeName: "chainguard.platform.iam.v2.RoleBindingIdentity",
      uid: row.identityUid,
      name: row.identityName,
      description: row.identityDescription,
      subject: row.identitySubject ?? "",
      issuer: row.identityIssuer ?? "",
      email: row.identityEmail,
    },
    group: { $typeName: "chainguard.platform.iam.v2.RoleBindingGroup", uid: row.groupUid, name: row.groupName, description: row.groupDescription },
    role: { $typeName: "chainguard.platform.iam.v2.RoleBindingRole", uid: row.roleUid, name: row.roleName, description: row.roleDescription },
    createTime: timestampOf(row.createTime),
    identityUid: row.identityUid,
    roleUid: row.roleUid,
    updateTime: timestampOf(row.updateTime),
  };
}
