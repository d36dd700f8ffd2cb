// Terms acceptance rows -> chainguard.platform.iam.v2.TermsAcceptance.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { TermsAcceptanceSchema, type TermsAcceptance } from "../../gen/chainguard/platform/iam/v2/terms_pb.js";
import type { TermsAcceptanceRow } from "../db/schema/index.js";

export function toTermsAcceptance(row: TermsAcceptanceRow): TermsAcceptance {
  return create(TermsAcceptanceSchema, {
    docId: row.docId,
    acceptedBy: row.acceptedBy,
    orgUid: row.orgUid,
    createTime: timestampFromDate(row.createTime),
  });
}
