import { Code, ConnectError } from "@connectrpc/connect";
import { expect } from "vitest";
import { BadRequestSchema } from "../../gen/google/rpc/error_details_pb.js";

/** Runs fn, expects INVALID_ARGUMENT, and returns its BadRequest field violations. */
export function violationsOf(fn: () => unknown): { field: string; description: string }[] {
  try {
    fn();
  } catch (e) {
    const err = ConnectError.from(e);
    expect(err.code).toBe(Code.InvalidArgument);
    return err.findDetails(BadRequestSchema).flatMap((b) => b.fieldViolations.map((v) => ({ field: v.field, description: v.description })));
  }
  throw new Error("expected INVALID_ARGUMENT");
}
