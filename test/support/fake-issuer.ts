// A fake OIDC provider on 127.0.0.1 (plain http, ephemeral port): discovery document, JWKS, and tokens
// minted with jose, signed with an RS256 or an ES256 key. Knobs to misbehave: a wrong issuer in discovery,
// a jwks_uri elsewhere, rotated keys, failing or slow endpoints, oversized responses, redirects. Counts the
// requests it serves so tests can check what the server fetched.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, generateKeyPair, SignJWT, type JWK, type JWTPayload } from "jose";
import type { webcrypto } from "node:crypto";

type CryptoKey = webcrypto.CryptoKey;
export type FakeAlg = "RS256" | "ES256";

interface SigningKey {
  alg: FakeAlg;
  kid: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
}

export interface MintOptions {
  /** Default "RS256". */
  alg?: FakeAlg;
  /** Lifetime in seconds from now (default 600); negative for an already expired token. */
  ttlSeconds?: number;
  /** Override or remove (undefined) the standard claims. */
  iss?: string | undefined;
  iat?: number | undefined;
  exp?: number | undefined;
  /** Sign with a key that is not published (same kid as the published one unless `kid` is given). */
  unpublishedKey?: boolean;
  kid?: string;
}

export interface FakeIssuer {
  /** The issuer identifier: http://127.0.0.1:<port><path>. */
  readonly url: string;
  readonly port: number;
  /** Requests served, by endpoint. */
  readonly requests: { discovery: number; jwks: number };
  /** A token with these claims (sub required; aud and others as given). */
  mint(claims: JWTPayload & { sub: string }, opts?: MintOptions): Promise<string>;
  /** Replaces the key of `alg` with a new one (new kid). With keepOld the old key stays published. */
  rotate(alg?: FakeAlg, keepOld?: boolean): Promise<void>;
  /** The published JWKS. */
  jwks(): { keys: JWK[] };
  /** Misbehaviours; reset() restores the defaults. */
  knobs: {
    /** The `issuer` the discovery document declares (default: url). */
    discoveryIssuer?: string;
    /** The `jwks_uri` the discovery document declares (default: url + "/jwks"). */
    jwksUri?: string;
    /** HTTP status of discovery / JWKS (default 200). */
    discoveryStatus?: number;
    jwksStatus?: number;
    /** Extra bytes of padding in each response (to exceed size caps). */
    padBytes?: number;
    /** Delay before each response, in ms. */
    delayMs?: number;
    /** Answer discovery with a redirect to this URL. */
    redirectDiscoveryTo?: string;
  };
  reset(): void;
  close(): Promise<void>;
}

async function newKey(alg: FakeAlg): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const kid = `${alg.toLowerCase()}-${Math.random().toString(36).slice(2, 10)}`;
  return { alg, kid, privateKey, publicJwk: { ...(await exportJWK(publicKey)), kid, alg, use: "sig" } };
}

/**
 * Starts a fake issuer. `path` is appended to the base URL to form the issuer identifier (e.g. "/tenant");
 * `audience` is the `aud` of the tokens it mints unless their claims name one (`aud: undefined`: none).
 */
export async function startFakeIssuer(opts: { path?: string; audience?: string } = {}): Promise<FakeIssuer> {
  const path = opts.path ?? "";
  const audience = opts.audience !== undefined ? { aud: opts.audience } : {};
  const current: Record<FakeAlg, SigningKey> = { RS256: await newKey("RS256"), ES256: await newKey("ES256") };
  let retired: SigningKey[] = [];
  const requests = { discovery: 0, jwks: 0 };
  const knobs: FakeIssuer["knobs"] = {};
  let url = "";

  const jwks = () => ({ keys: [current.RS256.publicJwk, current.ES256.publicJwk, ...retired.map((k) => k.publicJwk)] });

  const server = http.createServer((req, res) => {
    const reqPath = (req.url ?? "/").split("?", 1)[0]!;
    const send = (status: number, body: unknown) => {
      const pad = knobs.padBytes ? { padding: "x".repeat(knobs.padBytes) } : {};
      const text = JSON.stringify(typeof body === "object" && body !== null ? { ...body, ...pad } : body);
      const go = () => res.writeHead(status, { "content-type": "application/json" }).end(text);
      if (knobs.delayMs) setTimeout(go, knobs.delayMs);
      else go();
    };
    if (reqPath === `${path}/.well-known/openid-configuration`) {
      requests.discovery++;
      if (knobs.redirectDiscoveryTo) {
        res.writeHead(302, { location: knobs.redirectDiscoveryTo }).end();
        return;
      }
      send(knobs.discoveryStatus ?? 200, {
        issuer: knobs.discoveryIssuer ?? url,
        jwks_uri: knobs.jwksUri ?? `${url}/jwks`,
        response_types_supported: ["id_token"],
        subject_types_supported: ["public"],
        id_token_signing_alg_values_supported: ["RS256", "ES256"],
      });
      return;
    }
    if (reqPath === `${path}/jwks`) {
      requests.jwks++;
      send(knobs.jwksStatus ?? 200, jwks());
      return;
    }
    send(404, { error: "not found" });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  url = `http://127.0.0.1:${port}${path}`;

  return {
    url,
    port,
    requests,
    knobs,
    jwks,
    async mint(claims, o = {}) {
      const alg = o.alg ?? "RS256";
      const key = o.unpublishedKey ? await newKey(alg) : current[alg];
      const kid = o.kid ?? (o.unpublishedKey ? current[alg].kid : key.kid);
      const now = Math.floor(Date.now() / 1000);
      const ttl = o.ttlSeconds ?? 600;
      const payload: JWTPayload = { iss: url, iat: ttl < 0 ? now + ttl - 60 : now, exp: now + ttl, ...audience, ...claims };
      for (const name of ["iss", "iat", "exp"] as const) {
        if (!(name in o)) continue;
        if (o[name] === undefined) delete payload[name];
        else payload[name] = o[name] as never;
      }
      return new SignJWT(payload).setProtectedHeader({ alg, kid, typ: "JWT" }).sign(key.privateKey);
    },
    async rotate(alg = "RS256", keepOld = false) {
      if (keepOld) retired.push(current[alg]);
      current[alg] = await newKey(alg);
    },
    reset() {
      for (const k of Object.keys(knobs)) delete knobs[k as keyof typeof knobs];
      retired = [];
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A key pair outside any issuer, with its public JWKS as a string (for StaticKeys identities). */
export async function staticKeyPair(alg: FakeAlg = "ES256"): Promise<{
  issuerKeys: string;
  sign(claims: JWTPayload, o?: { ttlSeconds?: number }): Promise<string>;
}> {
  const key = await newKey(alg);
  return {
    issuerKeys: JSON.stringify({ keys: [key.publicJwk] }),
    async sign(claims, o = {}) {
      const now = Math.floor(Date.now() / 1000);
      return new SignJWT({ iat: now, exp: now + (o.ttlSeconds ?? 600), ...claims })
        .setProtectedHeader({ alg, kid: key.kid, typ: "JWT" })
        .sign(key.privateKey);
    },
  };
}
