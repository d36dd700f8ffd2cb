// Pending group access request rows <-> apiserver.iam.v1.GroupAccessRequest.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { GroupAccessRequestSchema, type GroupAccessRequest } from "../../gen/apiserver/iam/v1/group_access_requests_pb.js";
import type { PendingAccessRequestRow } from "../db/schema/index.js";

export function toGroupAccessRequest(row: PendingAccessRequestRow): GroupAccessRequest {
  return create(GroupAccessRequestSchema, {
    uid: row.uid,
    groupUid: row.groupUid,
    identityUid: row.identityUid,
    identityName: row.identityName,
    identityEmail: row.identityEmail,
    createTime: timestampFromDate(row.createTime),
    requestTime: timestampFromDate(row.requestTime),
  });
}
