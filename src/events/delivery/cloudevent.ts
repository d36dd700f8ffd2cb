// One delivery as an HTTP request: a CloudEvent 1.0 in binary content mode (attributes in ce-* headers, the
// data as the body), authenticated with a token of this server's own issuer that binds the body:
//
//   ce-specversion 1.0            ce-id      the event's id (the same on every attempt and every sink)
//   ce-type        the method's event type   ce-source  <issuer URL>/<package>.<Service>/<Method>
//   ce-subject     the resource uid          ce-time    when the change was committed (RFC 3339)
//   ce-bodytype    the body's proto message name (what the published SDK's events.Body decodes it into)
//   ce-<extension> each extension the method's event names, as the published SDK sets it for the type: ce-group
//                  (for most types the group the resource is in; the organization for tags and identity
//                  provider mappings; the parent of a deleted group), ce-identityprovider (a mapping's provider)
//   content-type   application/json
//   body           {"actor": {"subject": <caller uid>}, "body": <response, or request for a delete>}, the body
//                  as the SDK's redaction for its type leaves it, and left out when that is nothing
//   authorization  Bearer <JWT: iss = issuer, aud = "customer", sub = "webhook:<subscription's group>",
//                  webhook.digest = "sha256:<hex of the body>", valid a few minutes>
//
// A receiver verifies the token against the issuer's JWKS (/.well-known/jwks.json) with any OIDC library,
// then the body against the digest.
import { createHash } from "node:crypto";
import { SignJWT } from "jose";
import type { KeyStore } from "../../kernel/auth/index.js";
import type { ClaimedDelivery } from "./queue.js";

/** The audience of delivery tokens. */
export const WEBHOOK_AUDIENCE = "customer";
/** How long a delivery token is valid: each attempt gets a new one. */
const WEBHOOK_TOKEN_TTL_SECONDS = 300;

export interface DeliveryRequest {
  headers: Record<string, string>;
  body: Buffer;
}

/** The body: the actor and the stored event body (when the event has one), as JSON bytes. */
function deliveryBody(d: Pick<ClaimedDelivery, "actor" | "body">): Buffer {
  const actor = `{"actor":{"subject":${JSON.stringify(d.actor)}}`;
  return Buffer.from(d.body === null ? `${actor}}` : `${actor},"body":${d.body}}`);
}

/** A CloudEvent extension's header: ce- and its name, which CloudEvents limits to lower-case letters and digits. */
const EXTENSION_NAME = /^[a-z0-9]{1,20}$/;

/** The ce-* headers of the event's extensions: the stored ones, else (rows recorded before them) ce-group. */
function extensionHeaders(d: Pick<ClaimedDelivery, "extensions" | "bodyType" | "eventGroup">): Record<string, string> {
  const stored = Object.entries(d.extensions).filter(([name, value]) => EXTENSION_NAME.test(name) && typeof value === "string" && value !== "");
  const headers: Record<string, string> = stored.length > 0 ? Object.fromEntries(stored.map(([name, value]) => [`ce-${name}`, value])) : d.eventGroup ? { "ce-group": d.eventGroup } : {};
  if (d.bodyType) headers["ce-bodytype"] = d.bodyType;
  return headers;
}

function digestOf(body: Buffer): string {
  return `sha256:${createHash("sha256").update(body).digest("hex")}`;
}

export async function deliveryRequest(d: ClaimedDelivery, opts: { issuer: string; keys: KeyStore; body?: Buffer }): Promise<DeliveryRequest> {
  const body = opts.body ?? deliveryBody(d);
  const { kid, alg, key } = await opts.keys.signingKey();
  const now = Math.floor(Date.now() / 1000);
  const token = await new SignJWT({ webhook: { digest: digestOf(body) } })
    .setProtectedHeader({ alg, kid, typ: "JWT" })
    .setIssuer(opts.issuer)
    .setSubject(`webhook:${d.subscriptionGroup}`)
    .setAudience(WEBHOOK_AUDIENCE)
    .setIssuedAt(now)
    .setExpirationTime(now + WEBHOOK_TOKEN_TTL_SECONDS)
    .sign(key);
  return {
    body,
    headers: {
      "ce-specversion": "1.0",
      "ce-id": d.eventId,
      "ce-type": d.type,
      "ce-source": `${opts.issuer}${d.method}`,
      "ce-subject": d.subject,
      "ce-time": d.eventTime.toISOString(),
      ...extensionHeaders(d),
      "content-type": "application/json",
      "content-length": String(body.length),
      authorization: `Bearer ${token}`,
    },
  };
}
