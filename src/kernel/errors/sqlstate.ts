// The database errors domain code reacts to, by SQLSTATE (never by message text). Drivers and Drizzle wrap
// them; sqlStateOf looks through the cause chain.
import { sqlStateOf } from "./boundary.js";

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
