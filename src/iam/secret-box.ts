// Encryption at rest of the secrets the service must give back to itself later (an identity provider's OIDC
// client secret): AES-256-GCM with a key the operator configures (IDP_SECRET_KEY), or, in development only,
// one kept in the database (db/secrets.ts). Production without a key stores no such secret: seal() refuses,
// and the caller answers FAILED_PRECONDITION naming the setting.
//
// A sealed value is "v1.<key id>.<iv>.<ciphertext+tag>" (base64url parts). The key id (the first 8 bytes of
// the key's sha256) tells a value sealed under another key from a corrupted one. The associated data binds a
// value to the row it belongs to (the provider's uid), so a sealed secret copied onto another row does not open.
import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";
import { SECRET_KEY_BYTES as KEY_BYTES } from "../config.js";

const VERSION = "v1";
const IV_BYTES = 12;
const TAG_BYTES = 16;

export interface SecretBox {
  /** Encrypts `plaintext` for the row `context` (its uid). */
  seal(plaintext: string, context: string): string;
  /** Decrypts a value sealed for `context`; throws when it was sealed under another key or context, or altered. */
  open(sealed: string, context: string): string;
}

/** Thrown by a box without a key: nothing can be sealed or opened. */
export class NoSecretKeyError extends Error {}

function keyIdOf(key: Uint8Array): string {
  return createHash("sha256").update(key).digest().subarray(0, 8).toString("base64url");
}

/** A box over a 32-byte key, or one that refuses everything (production without IDP_SECRET_KEY) when undefined. */
export function createSecretBox(key: Uint8Array | undefined): SecretBox {
  if (key === undefined) {
    const refuse = (): never => {
      throw new NoSecretKeyError("no secret key is configured (IDP_SECRET_KEY)");
    };
    return { seal: refuse, open: refuse };
  }
  if (key.length !== KEY_BYTES) throw new Error(`a secret box key is ${KEY_BYTES} bytes, got ${key.length}`);
  const k = Buffer.from(key);
  const keyId = keyIdOf(k);
  return {
    seal(plaintext, context) {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv("aes-256-gcm", k, iv);
      cipher.setAAD(Buffer.from(context, "utf8"));
      const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final(), cipher.getAuthTag()]);
      return [VERSION, keyId, iv.toString("base64url"), body.toString("base64url")].join(".");
    },
    open(sealed, context) {
      const parts = sealed.split(".");
      if (parts.length !== 4 || parts[0] !== VERSION) throw new Error("not a sealed secret");
      if (parts[1] !== keyId) throw new Error("the secret was sealed under another key");
      const iv = Buffer.from(parts[2]!, "base64url");
      const body = Buffer.from(parts[3]!, "base64url");
      if (iv.length !== IV_BYTES || body.length < TAG_BYTES) throw new Error("not a sealed secret");
      const decipher = createDecipheriv("aes-256-gcm", k, iv);
      decipher.setAAD(Buffer.from(context, "utf8"));
      decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
      return Buffer.concat([decipher.update(body.subarray(0, body.length - TAG_BYTES)), decipher.final()]).toString("utf8");
    },
  };
}
