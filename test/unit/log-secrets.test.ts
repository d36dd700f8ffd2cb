// The check of the suite's log lines (test/support/secrets.ts, run on every test file by log-capture.ts)
// finds what it looks for, and the logger itself keeps credential-named fields out of its lines.
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { CreateIdentityProviderRequestSchema } from "../../gen/chainguard/platform/iam/v2/identity_providers_pb.js";
import { addLogTap, log } from "../../src/kernel/log.js";
import { findLeaks, registerSecretsOf, registeredSecrets } from "../support/secrets.js";

const jwt = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhYmMiLCJpc3MiOiJ4In0.c2lnbmF0dXJlLXNpZ25hdHVyZQ";

describe("findLeaks", () => {
  it.each([
    ["a JWT", `{"msg":"x","t":"${jwt}"}`],
    ["a refresh token", `{"msg":"x","why":"cgrt_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}`],
    ["a SCIM token", `{"msg":"x","v":"cgscim_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}`],
    ["a group invite code", `{"msg":"x","v":"cginv_0123456789abcdef.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}`],
    ["a bearer credential", `{"msg":"x","h":"Bearer opaque-token-of-some-other-kind-123"}`],
    ["a secret the test used", `{"msg":"x","v":"prefix my-own-secret-value suffix"}`],
  ])("finds %s", (what, line) => {
    expect(findLeaks([line], ["my-own-secret-value"])).toEqual([`${what} in "x" (fields ${Object.keys(JSON.parse(line) as object).join(", ")})`]);
  });

  it("passes lines without any, a bearer challenge included", () => {
    expect(findLeaks(['{"msg":"request","code":"UNAUTHENTICATED","challenge":"Bearer error=\\"invalid_token\\""}'], ["my-own-secret-value"])).toEqual([]);
  });

  it("registers the debug_redact fields of a message, inside oneofs too", () => {
    const request = create(CreateIdentityProviderRequestSchema, {
      parent: "0123456789abcdef0123456789abcdef01234567",
      identityProvider: { name: "x", configuration: { case: "oidc", value: { issuer: "https://issuer.example", clientId: "client", clientSecret: "a-client-secret-to-find" } } },
    });
    registerSecretsOf(CreateIdentityProviderRequestSchema, request);
    expect(registeredSecrets().has("a-client-secret-to-find")).toBe(true);
    expect(registeredSecrets().has("0123456789abcdef0123456789abcdef01234567")).toBe(false);
  });
});

describe("the logger", () => {
  it("writes credential-named text fields and request headers as [redacted], and keeps flags", () => {
    const lines: string[] = [];
    const untap = addLogTap((l) => lines.push(l));
    try {
      log.debug("with credentials", { token: "t0ken-value", refreshToken: true, clientSecret: "s3cret-value", headers: { authorization: "Bearer abc", accept: "*/*" } });
    } finally {
      untap();
    }
    const line = JSON.parse(lines.find((l) => l.includes("with credentials"))!) as Record<string, unknown>;
    expect(line).toMatchObject({ level: "debug", msg: "with credentials", token: "[redacted]", refreshToken: true, clientSecret: "[redacted]", headers: { authorization: "[redacted]", accept: "*/*" } });
    expect(typeof line.time).toBe("string");
  });
});
