// google.protobuf.Timestamp messages from the Dates rows hold, built as plain message objects: protobuf-es 2
// messages are plain objects, and a list page makes two per row, where create() would walk the schema each
// time. The same value as timestampFromDate (milliseconds, floor division for instants before 1970).
import type { Timestamp } from "@bufbuild/protobuf/wkt";

export function timestampOf(date: Date): Timestamp {
  const ms = date.getTime();
  const seconds = Math.floor(ms / 1000);
  return { $typeName: "google.protobuf.Timestamp", seconds: BigInt(seconds), nanos: (ms - seconds * 1000) * 1_000_000 };
}
