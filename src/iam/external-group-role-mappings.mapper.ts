// External group role mapping rows -> chainguard.platform.iam.v2.ExternalGroupRoleMapping messages.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { ExternalGroupRoleMappingSchema, type ExternalGroupRoleMapping } from "../../gen/chainguard/platform/iam/v2/external_group_role_mappings_pb.js";
import type { ExternalGroupRoleMappingRow } from "../db/schema/index.js";

export function toExternalGroupRoleMapping(row: ExternalGroupRoleMappingRow): ExternalGroupRoleMapping {
  return create(ExternalGroupRoleMappingSchema, {
    uid: row.uid,
    identityProviderUid: row.identityProviderUid,
    externalGroupId: row.externalGroupId,
    roleUid: row.roleUid,
    scope: row.scope,
    createTime: timestampFromDate(row.createTime),
  });
}
