// Role rows <-> chainguard.platform.iam.v2.Role messages.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { Capability } from "../../gen/capabilities/capabilities_pb.js";
import { RoleSchema, type Role } from "../../gen/chainguard/platform/iam/v2/roles_pb.js";
import type { RoleRow } from "../db/schema/index.js";

export function toRole(row: RoleRow): Role {
  return create(RoleSchema, {
    uid: row.uid,
    name: row.name,
    description: row.description,
    capabilities: row.capabilities as Capability[],
    createTime: timestampFromDate(row.createTime),
    updateTime: timestampFromDate(row.updateTime),
  });
}
