// Group rows <-> chainguard.platform.iam.v2.Group messages.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { GroupSchema, type Group } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import type { GroupFields, GroupRow } from "../db/schema/index.js";

export function toGroup(row: GroupRow): Group {
  return create(GroupSchema, {
    uid: row.uid,
    name: row.name,
    description: row.description,
    verified: row.verified,
    kind: row.kind,
    status: row.status,
    createTime: timestampFromDate(row.createTime),
    updateTime: timestampFromDate(row.updateTime),
  });
}

/** The client-writable fields of a group message (output-only fields are never taken from a request). */
export function groupFields(group: Group): GroupFields {
  return { name: group.name, description: group.description, verified: group.verified, kind: group.kind };
}
