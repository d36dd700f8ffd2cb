// Group rows <-> chainguard.platform.iam.v2.Group messages.
import type { Group } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import type { GroupFields, GroupRow } from "../db/schema/index.js";
import { timestampOf } from "../kernel/timestamp.js";

/**
 * The row as the message, every field set: a plain message object (protobuf-es 2 messages are plain objects),
 * where create() would walk the schema on every Get.
 */
export function toGroup(row: GroupRow): Group {
  return {
    $typeName: "chainguard.platform.iam.v2.Group",
    uid: row.uid,
    name: row.name,
    description: row.description,
    resourceLimits: {},
    verified: row.verified,
    createTime: timestampOf(row.createTime),
    updateTime: timestampOf(row.updateTime),
    kind: row.kind,
    status: row.status,
  };
}

/** The client-writable fields of a group message (output-only fields are never taken from a request). */
export function groupFields(group: Group): GroupFields {
  return { name: group.name, description: group.description, verified: group.verified, kind: group.kind };
}
