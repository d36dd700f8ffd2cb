// Authentication and authorization for every protocol, driven by each method's `auth` option:
//   disabled                 -> no token needed
//   enabled, scoped          -> a valid bearer token, and every listed capability on the group named by the
//                               request's iam_scope field (bindings on that group or any ancestor)
//   enabled, unscoped        -> a valid bearer token; the handler filters (Lists: visibleScopes) or checks
//   ... identity_optional    -> a bearer token; one of another issuer that assumes no identity passes with no
//                               access, and the handler verifies it (presentedTokenKey)
// Authorization runs before the handler reads anything, so a caller without the capability gets
// PERMISSION_DENIED whether or not the resource exists.
import type { DescField, DescMethod } from "@bufbuild/protobuf";
import type { ConnectError, Interceptor, StreamRequest, UnaryRequest } from "@connectrpc/connect";

type UnaryOrStreamRequest = UnaryRequest | StreamRequest;
import type { Capability } from "../../../gen/capabilities/capabilities_pb.js";
import { parseAuthorization } from "../authorization-header.js";
import { authRuleOf, httpRuleOf, isGlobalData, scopePathOf } from "../descriptors.js";
import { invalidArgument, unauthenticated } from "../errors/index.js";
import { isValidUid } from "../uidp.js";
import { createCandidateAccess } from "./access.js";
import { isNoIdentityRefusal, type Authenticator } from "./authenticator.js";
import { accessKey, presentedTokenKey, ruleCapabilitiesKey } from "./principal.js";

type Rule =
  | { kind: "disabled" }
  | { kind: "unscoped"; capabilities: Capability[]; identityOptional: boolean }
  | { kind: "scoped"; capabilities: Capability[]; scopePath: readonly DescField[] };

/** The method's rule in the form the interceptor uses. Methods with no rule are refused (fail closed). */
export function ruleOf(method: DescMethod): Rule {
  const auth = authRuleOf(method);
  if (!auth || auth.mode.case === undefined) throw new Error(`${method.parent.typeName}.${method.name} has no auth rule`);
  if (auth.mode.case === "disabled") return { kind: "disabled" };
  const { capabilities, unscoped, identityOptional } = auth.mode.value;
  if (identityOptional && (!unscoped || capabilities.length > 0)) {
    throw new Error(`${method.parent.typeName}.${method.name}: identity_optional needs an unscoped rule naming no capability`);
  }
  // A scoped rule of a service over global data is read as unscoped: its resources belong to no group.
  if (unscoped || isGlobalData(method.parent)) return { kind: "unscoped", capabilities, identityOptional };
  const scopePath = scopePathOf(method.input);
  if (!scopePath) throw new Error(`${method.parent.typeName}.${method.name} is scoped but has no iam_scope field`);
  return { kind: "scoped", capabilities, scopePath };
}

/** The scope uid from the request, following the iam_scope path (e.g. group.uid). */
function scopeOf(message: unknown, path: readonly DescField[]): string {
  let value: unknown = message;
  for (const f of path) value = (value as Record<string, unknown> | undefined)?.[f.localName];
  const uid = typeof value === "string" ? value : "";
  if (uid !== "" && isValidUid(uid)) return uid;
  const field = path.map((f) => f.name).join(".");
  throw invalidArgument({ field, description: uid === "" ? "is required" : "is not a valid uid" });
}

/** What a request's Authorization header holds; a malformed one carries its refusal. */
export type Authorization = { kind: "none" } | { kind: "bearer"; token: string } | { kind: "malformed"; error: ConnectError };

/** Reads a request's Authorization header (kernel/authorization-header.ts), refusing a malformed one. */
export function readAuthorization(header: Headers): Authorization {
  const auth = parseAuthorization(header.get("authorization"));
  if (auth.kind !== "malformed") return auth;
  return { kind: "malformed", error: unauthenticated(`The Authorization header ${auth.problem}`, "AUTHORIZATION_MALFORMED") };
}

/** The bearer token of a request, or undefined when it has no Authorization header; a malformed one is refused. */
export function bearerToken(header: Headers): string | undefined {
  const auth = readAuthorization(header);
  if (auth.kind === "malformed") throw auth.error;
  return auth.kind === "bearer" ? auth.token : undefined;
}

export interface AuthInterceptorOptions {
  authenticator: Authenticator;
  /**
   * Services outside the API contract that need no credentials (gRPC health and reflection). Any other
   * method without an auth rule is refused.
   */
  openServices?: readonly string[];
  /**
   * Services whose writing methods (any HTTP binding but GET) can change what callers are granted; after
   * each such call, successful or not, `grantsChanged` runs before the response is sent.
   */
  grantServices?: readonly string[];
  grantsChanged?: () => void;
}

/** True for a method whose HTTP binding reads (GET), or that has none. */
function isRead(method: DescMethod): boolean {
  const pattern = httpRuleOf(method)?.pattern;
  return pattern === undefined || pattern.case === "get";
}

export function createAuthInterceptor(opts: AuthInterceptorOptions): Interceptor {
  const open = new Set(opts.openServices ?? []);
  const rules = new Map<DescMethod, Rule>();
  const cachedRuleOf = (m: DescMethod): Rule => {
    let r = rules.get(m);
    if (!r) rules.set(m, (r = open.has(m.parent.typeName) ? { kind: "disabled" } : ruleOf(m)));
    return r;
  };
  const grantServices = new Set(opts.grantServices ?? []);
  const changesGrants = (m: DescMethod) => grantServices.has(m.parent.typeName) && !isRead(m);

  /** Authenticates the caller, keeps its access for the handler, and checks a scoped method's capabilities. */
  const authorize = async (req: UnaryOrStreamRequest) => {
    const rule = cachedRuleOf(req.method);
    if (rule.kind === "disabled") return;
    const token = bearerToken(req.header);
    if (!token) throw unauthenticated("This method needs an Authorization: Bearer <token> header", "TOKEN_MISSING");
    let authenticated;
    try {
      authenticated = await opts.authenticator.authenticate(token);
    } catch (err) {
      // A caller that has no identity yet (accepting an invite gives it one): no access; the handler
      // verifies the token itself (presentedTokenKey).
      if (rule.kind === "unscoped" && rule.identityOptional && isNoIdentityRefusal(err)) {
        req.contextValues.set(presentedTokenKey, token);
        return;
      }
      throw err;
    }
    const access = createCandidateAccess(authenticated);
    if (rule.kind === "unscoped" && rule.identityOptional) req.contextValues.set(presentedTokenKey, token);
    req.contextValues.set(accessKey, access);
    if (rule.kind === "unscoped") req.contextValues.set(ruleCapabilitiesKey, rule.capabilities);
    if (rule.kind === "scoped" && !req.stream) {
      await access.require(scopeOf(req.message, rule.scopePath), rule.capabilities);
    }
  };

  return (next) => async (req) => {
    await authorize(req);
    if (!opts.grantsChanged || !changesGrants(req.method)) return next(req);
    try {
      return await next(req);
    } finally {
      opts.grantsChanged();
    }
  };
}
