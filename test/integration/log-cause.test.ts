// An internal error is logged with its cause: a database error reaches the error boundary wrapped by
// Drizzle ("Failed query: ..."), and the log line must still say what the database said (SQLSTATE, detail,
// constraint), on either driver.
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { roleBindings } from "../../src/db/schema/index.js";
import { toPublicError } from "../../src/kernel/errors/index.js";
import { setLogLevel } from "../../src/kernel/log.js";
import { openTestDatabase, type TestDatabase } from "../support/database.js";

let database: TestDatabase;
beforeAll(async () => {
  database = await openTestDatabase();
});
afterAll(async () => {
  await database?.dispose();
});
afterEach(() => {
  vi.restoreAllMocks();
  setLogLevel("silent");
});

/** The JSON lines written to stderr while `fn` runs. */
async function logged(fn: () => Promise<void> | void): Promise<Array<Record<string, unknown>>> {
  const lines: string[] = [];
  vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
    lines.push(String(chunk));
    return true;
  });
  setLogLevel("error");
  await fn();
  return lines.map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe("the log line of an internal error", () => {
  it("keeps the driver's error under the query error: message, SQLSTATE, detail, constraint", async () => {
    let failure: unknown;
    try {
      await database.db.insert(roleBindings).values({ uid: "a/b", groupUid: "a", identityUid: "b", roleUid: "c" });
    } catch (err) {
      failure = err;
    }
    expect(failure).toBeInstanceOf(Error);
    const lines = await logged(() => {
      const err = toPublicError(failure, "iam.platform.test");
      expect(err.rawMessage).toMatch(/request id/);
      expect(err.rawMessage).not.toMatch(/role_bindings/);
    });
    const line = lines.find((l) => l.msg === "internal error");
    expect(line, JSON.stringify(lines)).toBeDefined();
    const err = line!.err as Record<string, unknown>;
    expect(err.message).toMatch(/insert into "role_bindings"/);
    const cause = err.cause as Record<string, unknown> | undefined;
    expect(cause, "the driver's error, as the cause").toBeDefined();
    expect(cause!.code).toBe("23503");
    expect(String(cause!.message)).toMatch(/foreign key/);
    expect(String(cause!.detail)).toMatch(/is not present in table/);
    expect(String(cause!.constraint_name ?? cause!.constraint)).toMatch(/^role_bindings_/);
  });
});
