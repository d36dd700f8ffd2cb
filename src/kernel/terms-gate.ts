// The operator's "needs accepted terms" marking (TERMS_REQUIRED_FOR): a marked method answers
// FAILED_PRECONDITION, reason TERMS_NOT_ACCEPTED, with the contract's TermsNotAcceptedDetail listing the
// documents the call's organization has not accepted, until it has accepted every configured document.
//
// Runs after authentication and authorization (a caller who may not call the method learns nothing about
// the organization's terms) and before the unit of work (it reads outside any transaction). Only scoped
// methods can be marked: the call's organization is the root of the group its request names, and what it
// has accepted includes what any ancestor of that group accepted (TermsService.ListTermsAcceptances).
import type { DescMethod } from "@bufbuild/protobuf";
import type { Interceptor } from "@connectrpc/connect";
import { TermsNotAcceptedDetailSchema } from "../../gen/chainguard/platform/iam/v2/terms_pb.js";
import type { TermsDocument } from "../config.js";
import { ruleOf } from "./auth/interceptor.js";
import { failedPrecondition } from "./errors/index.js";

export interface TermsGateOptions {
  /** Every document an organization must accept. */
  documents: readonly TermsDocument[];
  /** The marked methods, `<package>.<Service>/<Method>`. */
  requiredFor: readonly string[];
  /** The API's methods: every marked name must be one of them, unary and scoped. */
  methods: readonly DescMethod[];
  /** The document ids accepted for `uid` (a group, or a resource inside one) or any of its ancestors. */
  accepted(uid: string): Promise<ReadonlySet<string>>;
}

export const methodNameOf = (m: DescMethod): string => `${m.parent.typeName}/${m.name}`;

/**
 * The interceptor; throws (the server does not start) when a marked name is not a unary scoped method of
 * the API. Undefined when nothing is marked.
 */
export function createTermsGate(opts: TermsGateOptions): Interceptor | undefined {
  if (opts.requiredFor.length === 0 || opts.documents.length === 0) return undefined;
  const byName = new Map(opts.methods.map((m) => [methodNameOf(m), m]));
  const marked = new Map<DescMethod, readonly string[]>();
  for (const name of opts.requiredFor) {
    const method = byName.get(name);
    if (!method) throw new Error(`TERMS_REQUIRED_FOR: ${name} is not a method of the API`);
    const rule = ruleOf(method);
    if (method.methodKind !== "unary" || rule.kind !== "scoped") {
      throw new Error(`TERMS_REQUIRED_FOR: ${name} names no group in its request (only scoped methods can need accepted terms)`);
    }
    marked.set(method, rule.scopePath.map((f) => f.localName));
  }
  return (next) => async (req) => {
    const path = marked.get(req.method);
    if (!path || req.stream) return next(req);
    let value: unknown = req.message;
    for (const key of path) value = (value as Record<string, unknown> | undefined)?.[key];
    // The auth interceptor has checked the scope (present, a valid uid) and the caller's capabilities on it.
    const scope = String(value);
    const accepted = await opts.accepted(scope);
    const missing = opts.documents.filter((d) => !accepted.has(d.id));
    if (missing.length > 0) throw termsNotAccepted(scope.split("/")[0]!, missing);
    return next(req);
  };
}

/** FAILED_PRECONDITION, reason TERMS_NOT_ACCEPTED: a violation per missing document, and the contract's detail. */
export function termsNotAccepted(organization: string, missing: readonly TermsDocument[]) {
  const err = failedPrecondition(
    missing.map((d) => ({
      type: "TERMS_NOT_ACCEPTED",
      subject: d.id,
      description: `organization ${organization} has not accepted ${d.label} (${d.url}): an owner accepts it with TermsService.AcceptTerms`,
    })),
    "TERMS_NOT_ACCEPTED",
  );
  err.details.push({ desc: TermsNotAcceptedDetailSchema, value: { missing: missing.map((d) => ({ id: d.id, label: d.label, url: d.url })) } });
  return err;
}
