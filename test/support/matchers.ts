// Small matchers the contract case tables share.
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";

/** Matches the value `get()` returns when the test runs (case tables are built before beforeAll). */
export const lazy = (get: () => unknown) => ({
  asymmetricMatch: (actual: unknown) => actual === get(),
  toString: () => "lazy value",
  toAsymmetricMatcher: () => `lazy(${String(get())})`,
});

/** A timestamp in milliseconds. */
export const ms = (t: Timestamp | undefined) => timestampDate(t!).getTime();
