// Who a /v2/ request is and what it may do (RegistryAuthorizer), and the registry token endpoint (GET /token)
// of the token flow Docker-compatible clients implement.
//
// Credentials, on /v2/ and on /token alike: `Authorization: Bearer <token>`, or Basic with the user `_token`
// and a token as password (how the published SDK's registry keychain sends its token, and what
// `docker login -u _token` / `skopeo login -u _token` send). Tokens are verified by the kernel's
// authenticator: a platform access token of this server (audience: the issuer), a token of an external
// issuer an identity accepts, or a registry token (audience: the registry service, the issuer's host).
//
// A registry token is one of this server's tokens for the caller's identity, minted by /token for the
// actions it grants: its `access` claim names them per repository (as Distribution's tokens do), and its
// down-scoping restriction (restriction.ts) keeps only the capabilities of those actions on the groups of
// those repositories, so it can never do more than both say, and never more than the identity may do now.
//
// Actions and the capabilities they need on the repo (or, for a repo not created yet, its organization):
//   pull    CAP_REPO_BLOBS_GET; or nothing, when the repo is public (Repo.public)
//   push    CAP_MANIFEST_CREATE and CAP_TAG_CREATE; creating the repo also CAP_REPO_CREATE
//   delete  CAP_MANIFEST_DELETE and CAP_TAG_DELETE
import type http from "node:http";
import type http2 from "node:http2";
import { decodeJwt } from "jose";
import { Capability } from "../../../gen/capabilities/capabilities_pb.js";
import { createCandidateAccess, mintToken, verifyOwnToken, type Access, type Authenticator, type KeyStore } from "../../kernel/auth/index.js";
import { parseAuthorization } from "../../kernel/authorization-header.js";
import { log } from "../../kernel/log.js";
import type { AccessDecision, RegistryAction, RegistryAuthorizer, RepositoryTarget } from "./contracts.js";
import { isRootUid } from "../../kernel/uidp.js";
import { isValidName, splitName } from "./names.js";

type Req = http.IncomingMessage | http2.Http2ServerRequest;
type Res = http.ServerResponse | http2.Http2ServerResponse;

const ACTION_CAPABILITIES: Readonly<Record<RegistryAction, readonly Capability[]>> = {
  pull: [Capability.CAP_REPO_BLOBS_GET],
  push: [Capability.CAP_MANIFEST_CREATE, Capability.CAP_TAG_CREATE],
  delete: [Capability.CAP_MANIFEST_DELETE, Capability.CAP_TAG_DELETE],
};
const ACTIONS: readonly RegistryAction[] = ["pull", "push", "delete"];

/** The subject of a registry token minted for a caller without credentials (public repos only). */
const ANONYMOUS = "anonymous";
/** Lifetime of a registry token. Clients ask again when one is refused. */
const REGISTRY_TOKEN_TTL_SECONDS = 900;
/** Scopes one token request may name. */
const MAX_SCOPES = 20;

export interface RegistryAuthDeps {
  issuerUrl: string;
  /** The registry service: the issuer's host (what clients send as `service`, and registry tokens' audience). */
  service: string;
  keys: KeyStore;
  /** The kernel's authenticator for platform tokens (audience: the issuer). */
  platform: Authenticator;
  /** The kernel's authenticator for tokens whose audience is the registry service. */
  registry: Authenticator;
  /** The repository a name designates, for the token endpoint's scopes. */
  resolve(name: string): Promise<RepositoryTarget | undefined>;
}

/** The registry service of an issuer URL: its host (and port). */
export function registryServiceOf(issuerUrl: string): string {
  return new URL(issuerUrl).host;
}

type Credentials = { kind: "none" } | { kind: "token"; token: string } | { kind: "malformed"; problem: string };

/**
 * The token of a request's credentials: Basic with the user `_token` (read here: only the registry takes it),
 * or Bearer (read by the kernel, as on every other route).
 */
function credentialsOf(req: Req): Credentials {
  const header = req.headers.authorization;
  const basic = /^\s*basic\s+(\S+)\s*$/i.exec(header ?? "");
  if (basic) {
    const decoded = Buffer.from(basic[1]!, "base64").toString("utf8");
    const colon = decoded.indexOf(":");
    if (colon < 0) return { kind: "malformed", problem: "Basic credentials must be <user>:<password>" };
    const user = decoded.slice(0, colon);
    const password = decoded.slice(colon + 1);
    if (user !== "_token") return { kind: "malformed", problem: 'log in with the user "_token" and a token of this server as the password' };
    if (!password) return { kind: "malformed", problem: "the password must be a token of this server" };
    return { kind: "token", token: password };
  }
  const auth = parseAuthorization(header);
  if (auth.kind === "none") return auth;
  if (auth.kind === "bearer") return { kind: "token", token: auth.token };
  return { kind: "malformed", problem: `the Authorization header ${auth.problem}; or send Basic credentials: the user "_token" and a token as the password` };
}

/** What verified credentials establish: an identity's access (and, for a registry token, its `access` claim), or nobody. */
interface Caller {
  access: Access | undefined;
  /** A registry token's grants by repository name; undefined for a platform token (its capabilities decide). */
  claimed: ReadonlyMap<string, ReadonlySet<RegistryAction>> | undefined;
}

function claimedAccess(payload: Record<string, unknown>): Map<string, Set<RegistryAction>> | undefined {
  const access = payload.access;
  if (!Array.isArray(access)) return undefined;
  const out = new Map<string, Set<RegistryAction>>();
  for (const a of access as Array<{ type?: unknown; name?: unknown; actions?: unknown }>) {
    if (a?.type !== "repository" || typeof a.name !== "string" || !Array.isArray(a.actions)) continue;
    out.set(a.name, new Set(a.actions.filter((x): x is RegistryAction => ACTIONS.includes(x as RegistryAction))));
  }
  return out;
}

class Refused extends Error {}

/** A token's payload as the registry reads it, before verification. */
interface Decoded {
  /** Its audience is the registry service (a registry token), not the issuer (a platform token). */
  forRegistry: boolean;
  /** A registry token minted for a caller without credentials. */
  anonymous: boolean;
  /** A registry token's `access` claim (undefined: none, or a platform token). */
  claimed: ReadonlyMap<string, ReadonlySet<RegistryAction>> | undefined;
}

/** Tokens whose decoded payload is remembered. */
const DECODED_TOKENS = 10_000;

export function createRegistryAuthorizer(deps: RegistryAuthDeps): RegistryAuthorizer & {
  /** The caller of a request's credentials (undefined access: anonymous); throws Refused for bad credentials. */
  callerOf(req: Req): Promise<Caller>;
  /** Answers GET /token. */
  token(req: Req, res: Res, query: URLSearchParams): Promise<void>;
} {
  const realm = `${deps.issuerUrl.replace(/\/$/, "")}/token`;
  const challenge = (scope?: { repository: string; actions: readonly RegistryAction[] }, error?: string) =>
    `Bearer realm="${realm}",service="${deps.service}"` +
    (scope ? `,scope="repository:${scope.repository}:${scope.actions.join(",")}"` : "") +
    (error ? `,error="${error}"` : "");

  // What a token's payload says before it is verified (decoded once per token: a client sends the same token
  // on each request of a push or pull). Only the decoding is remembered; every request still verifies the
  // token (the authenticators remember their own verification, until the token's expiry).
  const decoded = new Map<string, Decoded>();
  const decode = (token: string): Decoded => {
    const known = decoded.get(token);
    if (known) return known;
    let payload: Record<string, unknown>;
    try {
      payload = decodeJwt(token);
    } catch {
      throw new Refused("the token is not a JWT");
    }
    const aud = payload.aud;
    const forRegistry = aud === deps.service || (Array.isArray(aud) && aud.includes(deps.service));
    const d: Decoded = { forRegistry, anonymous: forRegistry && payload.sub === ANONYMOUS, claimed: forRegistry ? claimedAccess(payload) : undefined };
    if (decoded.size >= DECODED_TOKENS) decoded.delete(decoded.keys().next().value!);
    decoded.set(token, d);
    return d;
  };

  async function callerOfToken(token: string): Promise<Caller> {
    const { forRegistry, anonymous, claimed } = decode(token);
    if (anonymous) {
      try {
        await verifyOwnToken(deps.keys, token, { issuer: deps.issuerUrl, audience: deps.service });
      } catch {
        throw new Refused("the token does not verify");
      }
      return { access: undefined, claimed: claimed ?? new Map() };
    }
    try {
      const candidates = await (forRegistry ? deps.registry : deps.platform).authenticate(token);
      return { access: createCandidateAccess(candidates), claimed };
    } catch (err) {
      log.debug("registry credentials refused", { err });
      throw new Refused("the token is not valid for this registry");
    }
  }

  async function callerOf(req: Req): Promise<Caller> {
    const creds = credentialsOf(req);
    if (creds.kind === "none") return { access: undefined, claimed: undefined };
    if (creds.kind === "malformed") throw new Refused(creds.problem);
    return callerOfToken(creds.token);
  }

  /** The actions of `asked` the caller may take on the target. */
  async function grantedTo(caller: Caller, target: RepositoryTarget, asked: readonly RegistryAction[]): Promise<Set<RegistryAction>> {
    const granted = new Set<RegistryAction>();
    const at = target.repoUid ?? target.groupUid;
    for (const action of asked) {
      const claimOk = caller.claimed === undefined || caller.claimed.get(target.name)?.has(action) === true;
      if (!claimOk) continue;
      if (action === "pull" && target.public) granted.add(action);
      else if (caller.access && at !== "" && (await caller.access.holds(at, ACTION_CAPABILITIES[action]))) granted.add(action);
    }
    return granted;
  }

  /**
   * The target of a token request's scope without reading it, when the name's organization is written as its
   * uid and the caller holds every asked action's capabilities on that organization: what is held there is
   * held on each repo in it (its grants reach them), whether the repo exists or is public, so the repo's row
   * would change nothing the token grants. Else undefined: the name is resolved (by name, or for what the
   * repo's row decides: public pulls, repos a caller may only reach below the organization).
   */
  async function heldOnOrganization(caller: Caller, name: string, asked: readonly RegistryAction[]): Promise<RepositoryTarget | undefined> {
    const { organization } = splitName(name);
    if (!caller.access || asked.length === 0 || !isRootUid(organization)) return undefined;
    for (const action of asked) if (!(await caller.access.holds(organization, ACTION_CAPABILITIES[action]))) return undefined;
    return { name, groupUid: organization };
  }

  async function mayCreateRepo(caller: Caller, target: RepositoryTarget): Promise<boolean> {
    return caller.access !== undefined && target.groupUid !== "" && (await caller.access.holds(target.groupUid, [Capability.CAP_REPO_CREATE]));
  }

  return {
    callerOf,
    challenge: (scope) => challenge(scope),

    async authenticate(req) {
      try {
        const caller = await callerOf(req);
        if (!caller.access && caller.claimed === undefined) {
          return { ok: false, status: 401, challenge: challenge(), code: "UNAUTHORIZED", message: "authentication required" };
        }
        return { ok: true, subject: caller.access?.actingAs, granted: new Set(), access: caller.access };
      } catch (err) {
        if (!(err instanceof Refused)) throw err;
        return { ok: false, status: 401, challenge: challenge(undefined, "invalid_token"), code: "UNAUTHORIZED", message: err.message };
      }
    },

    async authorize(req, target, actions): Promise<AccessDecision> {
      let caller: Caller;
      try {
        caller = await callerOf(req);
      } catch (err) {
        if (!(err instanceof Refused)) throw err;
        return { ok: false, status: 401, challenge: challenge({ repository: target.name, actions }, "invalid_token"), code: "UNAUTHORIZED", message: err.message };
      }
      const granted = await grantedTo(caller, target, actions);
      const all = actions.every((a) => granted.has(a));
      // No identity (no credentials, or an anonymous token), or a registry token lacking the action: the
      // client is to ask the token endpoint for these actions.
      const lacksScope = caller.claimed !== undefined && actions.some((a) => !caller.claimed!.get(target.name)?.has(a));
      if (!all && (!caller.access || lacksScope)) {
        return {
          ok: false,
          status: 401,
          challenge: challenge({ repository: target.name, actions }, caller.access ? "insufficient_scope" : undefined),
          code: "UNAUTHORIZED",
          message: "authentication required",
        };
      }
      return {
        ok: true,
        subject: caller.access?.actingAs,
        granted,
        access: caller.access,
        mayCreateRepo: granted.has("push") && (await mayCreateRepo(caller, target)),
      };
    },

    /** Answers GET /token: a registry token for the scopes asked that the caller's credentials grant. */
    async token(req: Req, res: Res, query: URLSearchParams): Promise<void> {
      const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
        const text = JSON.stringify(body);
        (res as http.ServerResponse).writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), "cache-control": "no-store", ...headers }).end(text);
      };
      const service = query.get("service");
      if (service !== null && service !== deps.service) {
        return send(400, { errors: [{ code: "UNSUPPORTED", message: `this token endpoint serves the service ${JSON.stringify(deps.service)}`, detail: null }] });
      }
      let caller: Caller;
      try {
        caller = await callerOf(req);
        // A registry token is not exchanged for another one: ask with the token it was minted from.
        if (caller.claimed !== undefined && caller.access) throw new Refused("a registry token cannot be exchanged for another registry token");
      } catch (err) {
        if (!(err instanceof Refused)) throw err;
        return send(401, { errors: [{ code: "UNAUTHORIZED", message: err.message, detail: null }] }, { "www-authenticate": `Basic realm="${realm}"` });
      }
      const scopes = query.getAll("scope").flatMap((s) => s.split(" ")).filter((s) => s !== "");
      if (scopes.length > MAX_SCOPES) return send(400, { errors: [{ code: "UNSUPPORTED", message: `at most ${MAX_SCOPES} scopes per token`, detail: null }] });
      const access: Array<{ type: "repository"; name: string; actions: RegistryAction[] }> = [];
      const groups = new Set<string>();
      const capabilities = new Set<Capability>();
      for (const scope of scopes) {
        const m = /^repository(?:\([a-z0-9]+\))?:(.+):([a-z*,]*)$/.exec(scope);
        if (!m || !isValidName(m[1]!)) continue; // scopes of other kinds (registry:catalog:*) grant nothing
        const name = m[1]!;
        const asked = [...new Set(m[2]!.split(",").flatMap((a) => (a === "*" ? ACTIONS : ACTIONS.includes(a as RegistryAction) ? [a as RegistryAction] : [])))];
        const target = (await heldOnOrganization(caller, name, asked)) ?? (await deps.resolve(name));
        const granted = target ? [...(await grantedTo({ ...caller, claimed: undefined }, target, asked))] : [];
        if (target && caller.access) {
          const at = target.groupUid;
          if (granted.some((a) => a !== "pull" || !target.public)) groups.add(at);
          for (const a of granted) for (const c of ACTION_CAPABILITIES[a]) capabilities.add(c);
          if (granted.includes("push") && (await mayCreateRepo(caller, target))) capabilities.add(Capability.CAP_REPO_CREATE);
        }
        const merged = access.find((a) => a.name === name);
        if (merged) merged.actions = [...new Set([...merged.actions, ...granted])];
        else access.push({ type: "repository", name, actions: granted });
      }
      let subject = ANONYMOUS;
      if (caller.access) {
        try {
          subject = caller.access.actingAs ?? caller.access.principal.identityUid;
        } catch (err) {
          // A token several identities share, none chosen by a grant: the caller is to exchange it for one.
          return send(400, { errors: [{ code: "DENIED", message: (err as Error).message, detail: null }] });
        }
      }
      const { token, expiry } = await mintToken(deps.keys, {
        issuer: deps.issuerUrl,
        subject,
        audience: deps.service,
        ttlSeconds: REGISTRY_TOKEN_TTL_SECONDS,
        claims: { access },
        ...(caller.access ? { restriction: { scopes: [...groups], capabilities: [...capabilities] } } : {}),
      });
      const now = new Date();
      send(200, {
        token,
        access_token: token,
        expires_in: Math.max(0, Math.round((expiry.getTime() - now.getTime()) / 1000)),
        issued_at: now.toISOString(),
      });
    },
  };
}

export type RegistryAuth = ReturnType<typeof createRegistryAuthorizer>;
