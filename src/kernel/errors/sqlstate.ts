// Database errors by SQLSTATE (never by message text): the ones domain code reacts to, and the ones every
// client may see mapped (fromDatabase). Drivers and Drizzle wrap them; sqlStateOf looks through the cause chain.
import { Code, ConnectError } from "@connectrpc/connect";
import { aborted, deadlineExceeded, unavailable } from "./builders.js";

/** SQLSTATE of a database error, looked up through the cause chain (Drizzle wraps driver errors). */
export function sqlStateOf(err: unknown): string | undefined {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code)) return code;
  }
  return undefined;
}

/**
 * The database could not be reached or dropped the connection: a socket error (refused, reset, timed out,
 * unreachable), a connection error of postgres.js (CONNECT_TIMEOUT, CONNECTION_CLOSED, ...), or an
 * SQLSTATE of class 08 (connection exception), 57P01-57P03 (the server shutting down or starting) or 53300
 * (too many connections). Looked up through the cause chain.
 */
export function isConnectionError(err: unknown): boolean {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code !== "string") continue;
    if (CONNECTION_CODES.has(code) || code.startsWith("CONNECTION_")) return true;
    if (/^08[0-9A-Z]{3}$/.test(code) || code === "53300" || code === "57P01" || code === "57P02" || code === "57P03") return true;
  }
  return false;
}

const CONNECTION_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "CONNECT_TIMEOUT",
]);

/** How long a client is told to wait before retrying a call that met an unreachable database. */
export const DATABASE_RETRY_MS = 1_000;

/**
 * Errors the database reports that a client may see: serialization failures and deadlocks (worth retrying);
 * unavailability; text the database cannot store (a NUL character, which PostgreSQL refuses in any text
 * value: 22021 character_not_in_repertoire), which is the request's fault.
 */
export function fromDatabase(err: unknown): ConnectError | undefined {
  // A structured error raised beneath the driver's wrappers (the pool gate's DATABASE_BUSY, db/pool-gate.ts).
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof ConnectError) return e;
  }
  const state = sqlStateOf(err);
  if (state === "22021") {
    // Which field is not known here: the error boundary adds the ErrorInfo, without a BadRequest.
    return new ConnectError("A text field holds a character that cannot be stored (NUL, U+0000)", Code.InvalidArgument);
  }
  // query_canceled: a statement ran past statement_timeout (db/client.ts). The call ran out of time, as a
  // deadline would: DEADLINE_EXCEEDED (504) rather than UNAVAILABLE, which clients retry at once, adding the
  // same slow statement to a database already slow.
  if (state === "57014") return deadlineExceeded("A database statement took longer than allowed", "STATEMENT_TIMEOUT");
  if (state === "40001" || state === "40P01") return aborted("The request conflicted with a concurrent change; retry it");
  if (isConnectionError(err)) return unavailable("The database is unavailable; retry later", DATABASE_RETRY_MS, "DATABASE_UNAVAILABLE");
  return undefined;
}

/** An insert or update named a row that does not exist (a parent deleted or never there). */
export function isMissingReference(err: unknown): boolean {
  return sqlStateOf(err) === "23503"; // foreign_key_violation
}

/**
 * A delete (or key change) refused because other rows still reference the row: 23001 restrict_violation
 * (ON DELETE RESTRICT, which this schema uses; PostgreSQL 18 reports it) or 23503 foreign_key_violation
 * (what PostgreSQL 15 reports for the same refusal, and NO ACTION keys).
 */
export function isStillReferenced(err: unknown): boolean {
  const state = sqlStateOf(err);
  return state === "23001" || state === "23503";
}

/** A unique constraint refused the write. */
export function isUniqueViolation(err: unknown): boolean {
  return sqlStateOf(err) === "23505";
}
