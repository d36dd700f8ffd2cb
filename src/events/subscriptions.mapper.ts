// Subscription rows -> chainguard.platform.events.v2.Subscription messages.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { SubscriptionSchema, type Subscription } from "../../gen/chainguard/platform/events/v2/subscriptions_pb.js";
import type { SubscriptionRow } from "../db/schema/index.js";

export function toSubscription(row: SubscriptionRow): Subscription {
  return create(SubscriptionSchema, {
    uid: row.uid,
    sink: row.sink,
    createTime: timestampFromDate(row.createTime),
    updateTime: timestampFromDate(row.updateTime),
  });
}
