// The secrets a test used, and the check that none of them reached a log line. The contract harness
// registers what its calls carry (bearer tokens; request and response fields marked debug_redact, or named
// as tokens and secrets), the test server the tokens it mints; log-capture.ts taps every log line of a test
// file at debug level and runs `findLeaks` over them when the file ends. Credentials this service issues
// have recognisable shapes (JWTs, cgrt_ refresh tokens, cgscim_ SCIM tokens, cginv_ invite codes): those
// are looked for whether or not a test registered them.
import type { DescMessage, Message } from "@bufbuild/protobuf";

const registered = new Set<string>();

/** Shorter values are not looked for: they would match by chance (and no credential is that short). */
const MIN_SECRET_CHARS = 12;

export function registerSecret(value: string | undefined | null): void {
  if (value && value.length >= MIN_SECRET_CHARS) registered.add(value);
}

/** The secrets registered in this process (this test file). */
export function registeredSecrets(): ReadonlySet<string> {
  return registered;
}

/** The token of an Authorization: Bearer header, registered. */
export function registerAuthorization(headers: Record<string, string> | undefined): void {
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (name.toLowerCase() === "authorization") registerSecret(/^\s*bearer\s+(\S+)/i.exec(value)?.[1] ?? value);
  }
}

/** Fields holding a secret by name (page tokens are signed cursors, not credentials). */
const SECRET_NAME = /(^|_)(token|secret|password)$/;
const NOT_SECRET_NAME = /page_token$/;

/** Registers the secrets a message carries: fields marked debug_redact, or named as tokens and secrets. */
export function registerSecretsOf(desc: DescMessage, message: Message | undefined, depth = 0): void {
  if (!message || depth > 8) return;
  const record = message as unknown as Record<string, unknown>;
  for (const field of desc.fields) {
    const value = record[field.localName];
    if (value === undefined || value === null) continue;
    const secret = field.proto.options?.debugRedact === true || (SECRET_NAME.test(field.name) && !NOT_SECRET_NAME.test(field.name));
    if (field.fieldKind === "scalar" && secret) {
      for (const v of Array.isArray(value) ? value : [value]) if (typeof v === "string") registerSecret(v);
    } else if (field.fieldKind === "message") {
      for (const v of Array.isArray(value) ? value : [value]) registerSecretsOf(field.message, v as Message, depth + 1);
    } else if (field.fieldKind === "list" && field.listKind === "message") {
      for (const v of value as Message[]) registerSecretsOf(field.message, v, depth + 1);
    } else if (field.fieldKind === "list" && field.listKind === "scalar" && secret) {
      for (const v of value as unknown[]) if (typeof v === "string") registerSecret(v);
    }
  }
  // A oneof member is a field of desc.fields too, but kept under its oneof: { case, value }.
  for (const oneof of desc.oneofs) {
    const selected = record[oneof.localName] as { case?: string; value?: unknown } | undefined;
    const field = oneof.fields.find((f) => f.localName === selected?.case);
    if (!field || selected?.value === undefined) continue;
    if (field.fieldKind === "message") registerSecretsOf(field.message, selected.value as Message, depth + 1);
    else if (field.fieldKind === "scalar" && typeof selected.value === "string" && (field.proto.options?.debugRedact === true || SECRET_NAME.test(field.name))) {
      registerSecret(selected.value);
    }
  }
}

/** Credentials of recognisable shape, registered or not. */
const CREDENTIAL_SHAPES: ReadonlyArray<[string, RegExp]> = [
  ["a JWT", /eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+/],
  ["a refresh token", /cgrt_[A-Za-z0-9_-]{20,}/],
  ["a SCIM token", /cgscim_[A-Za-z0-9_-]{20,}/],
  ["a group invite code", /cginv_[0-9a-f]{16}\.[A-Za-z0-9_-]{20,}/],
  ["a bearer credential", /bearer\s+[A-Za-z0-9._~+/-]{20,}/i],
];

/** What leaked: one description per log line holding a secret (the secret itself is not repeated). */
export function findLeaks(lines: readonly string[], secrets: Iterable<string>): string[] {
  const leaks: string[] = [];
  const list = [...secrets];
  for (const line of lines) {
    const shape = CREDENTIAL_SHAPES.find(([, re]) => re.test(line));
    const secret = list.find((s) => line.includes(s));
    if (!shape && !secret) continue;
    const what = shape ? shape[0] : "a secret the test used";
    // The line's message and keys, without its values: enough to find the log call.
    let where = "";
    try {
      const parsed = JSON.parse(line) as Record<string, unknown>;
      where = `"${String(parsed.msg)}" (fields ${Object.keys(parsed).join(", ")})`;
    } catch {
      where = "a line that is not JSON";
    }
    leaks.push(`${what} in ${where}`);
  }
  return leaks;
}
