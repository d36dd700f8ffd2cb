// The secret box: AES-256-GCM sealing of secrets kept at rest, bound to the row they belong to.
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { parseSecretKey } from "../../src/config.js";
import { createSecretBox, NoSecretKeyError } from "../../src/iam/secret-box.js";

const key = () => new Uint8Array(randomBytes(32));

describe("createSecretBox", () => {
  const box = createSecretBox(key());

  it("opens what it sealed, for the same context", () => {
    const sealed = box.seal("s3cr3t-value ü", "org/0123456789abcdef");
    expect(box.open(sealed, "org/0123456789abcdef")).toBe("s3cr3t-value ü");
  });

  it("never shows the plaintext, and seals the same value differently each time", () => {
    const a = box.seal("plain-text-secret", "ctx");
    const b = box.seal("plain-text-secret", "ctx");
    expect(a).not.toContain("plain-text-secret");
    expect(Buffer.from(a.split(".")[3]!, "base64url").toString("latin1")).not.toContain("plain-text-secret");
    expect(a).not.toBe(b);
    expect(a).toMatch(/^v1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
  });

  it("refuses a value sealed for another row", () => {
    const sealed = box.seal("secret", "org/aaaaaaaaaaaaaaaa");
    expect(() => box.open(sealed, "org/bbbbbbbbbbbbbbbb")).toThrow();
  });

  it("refuses a value sealed under another key, saying so", () => {
    const sealed = createSecretBox(key()).seal("secret", "ctx");
    expect(() => box.open(sealed, "ctx")).toThrow(/another key/);
  });

  it("refuses an altered value", () => {
    const sealed = box.seal("secret", "ctx");
    const parts = sealed.split(".");
    const body = Buffer.from(parts[3]!, "base64url");
    body[0] = body[0]! ^ 1;
    expect(() => box.open([...parts.slice(0, 3), body.toString("base64url")].join("."), "ctx")).toThrow();
    expect(() => box.open("v1.x.y", "ctx")).toThrow(/not a sealed secret/);
    expect(() => box.open("plaintext", "ctx")).toThrow(/not a sealed secret/);
  });

  it("takes only a 32-byte key", () => {
    expect(() => createSecretBox(new Uint8Array(16))).toThrow(/32 bytes/);
  });

  it("without a key, refuses to seal or open anything", () => {
    const none = createSecretBox(undefined);
    expect(() => none.seal("secret", "ctx")).toThrow(NoSecretKeyError);
    expect(() => none.open(box.seal("secret", "ctx"), "ctx")).toThrow(NoSecretKeyError);
  });
});

describe("parseSecretKey", () => {
  const k = Buffer.alloc(32, 0xfb);
  it.each([k.toString("base64"), k.toString("base64url"), ` ${k.toString("base64")}\n`])("reads %j", (raw) => {
    expect(Buffer.from(parseSecretKey(raw) as Uint8Array)).toEqual(k);
  });
  it.each([
    ["", /base64/],
    ["not base64!", /base64/],
    [Buffer.alloc(31).toString("base64"), /32 bytes, got 31/],
    [Buffer.alloc(33).toString("base64"), /32 bytes, got 33/],
  ])("refuses %j", (raw, reason) => {
    const r = parseSecretKey(raw);
    expect(r).not.toBeInstanceOf(Uint8Array);
    expect((r as { refused: string }).refused).toMatch(reason);
  });
});
