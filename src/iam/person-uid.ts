// The uid of a person: the root-level identity (in no group) whose claim_match names exactly one issuer and
// subject. It is derived from that pair, so it is known before the identity exists: LookupIdentity answers
// it for a pair nobody registered yet, and whatever creates the person's identity later (bootstrap) gives it
// this uid. The first 160 bits of a SHA-256 over the pair, as 40 lowercase hex characters: the form of every
// root uid. The pair is encoded as a JSON array, so no two pairs share an input.
import { createHash } from "node:crypto";

export function personUidOf(issuer: string, subject: string): string {
  return createHash("sha256").update(JSON.stringify(["identity", issuer, subject])).digest("hex").slice(0, 40);
}
