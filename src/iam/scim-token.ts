// SCIM bearer tokens: shown once when generated, stored only as their sha256. A token is recognisable
// (prefix "cgscim_") and carries 256 random bits, written as 64 hex digits (the format the published SDK
// documents for GenerateScimTokenResponse.token).
import { createHash, randomBytes } from "node:crypto";

export const SCIM_TOKEN_PREFIX = "cgscim_";

/** A new token: the prefix and 32 random bytes, hex. */
export function newScimToken(): string {
  return SCIM_TOKEN_PREFIX + randomBytes(32).toString("hex");
}

/** What is stored and looked up: the token's sha256, hex. */
export function scimTokenHash(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}
