// Group invite codes: shown once, when the invite is created, and stored only as their sha256.
//
//   code     "cginv_" + key id + "." + 32 random bytes (256 bits) in base64url
//   key id   16 hex characters (64 random bits): the public part of the code. Get and List show it (List
//            filters by it), so an admin handed a code can tell which invite it is (the characters after
//            "cginv_" up to the "."); it grants nothing by itself.
// A fast hash is enough for a secret of 256 random bits (nothing to brute-force from the hash).
import { createHash, randomBytes } from "node:crypto";

export const INVITE_CODE_PREFIX = "cginv_";
/** The longest code looked up (a real one is 65 characters); anything longer is refused unread. */
export const MAX_INVITE_CODE_LENGTH = 256;
/** A key id: 16 lowercase hex characters. */
export const KEY_ID_PATTERN = /^[0-9a-f]{16}$/;

/** A new code and its key id. */
export function newInviteCode(): { code: string; keyId: string } {
  const keyId = randomBytes(8).toString("hex");
  return { code: `${INVITE_CODE_PREFIX}${keyId}.${randomBytes(32).toString("base64url")}`, keyId };
}

/** What is stored and looked up: the code's sha256, hex. */
export function inviteCodeHash(code: string): string {
  return createHash("sha256").update(code).digest("hex");
}
