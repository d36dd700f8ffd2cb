// SCIM 2.0 User resources (RFC 7643) <-> identity rows, and the PATCH operations of RFC 7644 3.5.2 applied
// to a User. It imports no store.
//
// What lives where: externalId and active are identity columns (external_id, active), because the server
// acts on them (correlation with logins, access); every other attribute the client wrote (userName, name,
// displayName, emails, ...) is kept as written in the `scim` jsonb column and given back as is. id, meta and
// schemas are the server's (readOnly): ignored in a body, refused as a PATCH target. The identity's own
// columns follow: name from userName (to the identity name pattern), email from the primary email.
import type { IdentityRow } from "../db/schema/index.js";
import { matchesScimFilter, ScimFilterError, parseScimFilter, type ScimFilter } from "./scim.filter.js";
import { isRecord } from "../kernel/records.js";

export const USER_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:User";
export const LIST_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:ListResponse";
export const ERROR_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:Error";
export const PATCH_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:PatchOp";

/** A SCIM error response (RFC 7644 3.12): its HTTP status, scimType when one applies, and a detail. */
export class ScimError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
    readonly scimType?: string,
  ) {
    super(detail);
    this.name = "ScimError";
  }

  body(): Record<string, unknown> {
    return { schemas: [ERROR_SCHEMA], status: String(this.status), ...(this.scimType ? { scimType: this.scimType } : {}), detail: this.detail };
  }
}

const invalidValue = (detail: string) => new ScimError(400, detail, "invalidValue");

/** What a User body sets on its identity. */
export interface ScimUserFields {
  userName: string;
  externalId: string;
  /** Undefined when the body does not say (a replace then keeps the identity's current state). */
  active: boolean | undefined;
  /** The attributes kept in the scim column: everything but id, meta, schemas, externalId and active. */
  attributes: Record<string, unknown>;
  /** The identity's name: userName lowercased, other characters than the identity name pattern's as "-". */
  name: string;
  /** The primary email's value (else the first one's), or "". */
  email: string;
}

/** Attributes the server owns: never stored from a body, never a PATCH target. */
const READ_ONLY = new Set(["id", "meta", "schemas"]);

/** The key of `obj` matching `name` case-insensitively (attribute names are case-insensitive, RFC 7643 2.1). */
function keyOf(obj: Record<string, unknown>, name: string): string | undefined {
  const lower = name.toLowerCase();
  return Object.keys(obj).find((k) => k.toLowerCase() === lower);
}

/** Reads a boolean as identity providers send it (Entra ID sends PATCH values such as "False"). */
function booleanOf(value: unknown, field: string): boolean {
  if (typeof value === "boolean") return value;
  if (typeof value === "string" && /^(true|false)$/i.test(value)) return value.toLowerCase() === "true";
  throw invalidValue(`${field} must be a boolean`);
}

function identityName(userName: string): string {
  return userName.toLowerCase().replace(/[^a-z0-9 ._-]/g, "-");
}

function primaryEmail(emails: unknown): string {
  if (!Array.isArray(emails)) return "";
  const withValue = emails.filter((e): e is Record<string, unknown> => isRecord(e) && typeof e.value === "string");
  const primary = withValue.find((e) => e.primary === true || e.primary === "true" || e.primary === "True") ?? withValue[0];
  return (primary?.value as string | undefined) ?? "";
}

/** Validates a User (a POST or PUT body, or the result of a PATCH) and splits it into what is stored where. */
export function userFields(body: unknown): ScimUserFields {
  if (!isRecord(body)) throw invalidValue("the body must be a JSON object (a SCIM User)");
  const schemas = body[keyOf(body, "schemas") ?? "schemas"];
  if (schemas !== undefined && (!Array.isArray(schemas) || !schemas.some((s) => typeof s === "string" && s.toLowerCase() === USER_SCHEMA.toLowerCase()))) {
    throw invalidValue(`schemas must include ${USER_SCHEMA}`);
  }
  const attributes: Record<string, unknown> = {};
  let externalId: unknown;
  let active: unknown;
  for (const [key, value] of Object.entries(body)) {
    const lower = key.toLowerCase();
    if (READ_ONLY.has(lower)) continue;
    if (lower === "externalid") externalId = value;
    else if (lower === "active") active = value;
    else attributes[lower === "username" ? "userName" : key] = value;
  }
  const userName = attributes.userName;
  if (typeof userName !== "string" || userName.trim() === "") throw invalidValue("userName is required (a non-empty string)");
  if (userName.length > 256) throw invalidValue("userName is longer than 256 characters");
  // externalId is what correlates the user with its logins through the provider (the token's sub or oid).
  if (typeof externalId !== "string" || externalId === "") throw invalidValue("externalId is required (a non-empty string): it correlates the user with its logins");
  if (externalId.length > 256) throw invalidValue("externalId is longer than 256 characters");
  const emailsKey = keyOf(attributes, "emails");
  const emails = emailsKey === undefined ? undefined : attributes[emailsKey];
  if (emails !== undefined && emails !== null) {
    if (!Array.isArray(emails) || emails.some((e) => !isRecord(e) || (e.value !== undefined && typeof e.value !== "string"))) {
      throw invalidValue("emails must be a list of objects with a string value");
    }
    if (emails.filter((e: Record<string, unknown>) => e.primary === true).length > 1) throw invalidValue("at most one email may be primary");
  }
  return {
    userName,
    externalId,
    active: active === undefined || active === null ? undefined : booleanOf(active, "active"),
    attributes,
    name: identityName(userName),
    email: primaryEmail(emails),
  };
}

/** The User as the client last wrote it, with its columns: what a PATCH starts from. */
export function userOf(row: Pick<IdentityRow, "scim" | "externalId" | "active" | "email" | "name">): Record<string, unknown> {
  // An identity the provider created at a login has no SCIM attributes yet: its userName is its email or name.
  const attributes = row.scim ?? { userName: row.email || row.name, ...(row.email ? { emails: [{ value: row.email, primary: true }] } : {}) };
  return { ...attributes, ...(row.externalId !== null ? { externalId: row.externalId } : {}), active: row.active };
}

/** The SCIM id of an identity: the last segment of its uid (the identity lives under the provider's group). */
export function scimIdOf(identityUid: string): string {
  return identityUid.slice(identityUid.lastIndexOf("/") + 1);
}

/** The User resource of an identity, as responses carry it. */
export function userResource(row: IdentityRow, location: string): Record<string, unknown> {
  return {
    schemas: [USER_SCHEMA],
    id: scimIdOf(row.uid),
    ...userOf(row),
    meta: {
      resourceType: "User",
      created: row.createTime.toISOString(),
      lastModified: row.updateTime.toISOString(),
      location,
      version: `W/"${row.updateTime.getTime()}"`,
    },
  };
}

// ---------------------------------------------------------------------------------------------------------
// PATCH (RFC 7644 3.5.2)

interface PatchPath {
  /** The attribute, without the User schema's URN. */
  attr: string;
  /** A value selection filter on a multi-valued attribute: `emails[type eq "work"]`. */
  filter?: ScimFilter;
  /** A sub-attribute: `name.givenName`, `emails[type eq "work"].value`. */
  sub?: string;
}

const USER_URN_PREFIX = USER_SCHEMA.toLowerCase() + ":";
const NAME = /^[A-Za-z][\w$-]*$/;

function parsePath(text: string): PatchPath {
  let rest = text.trim();
  if (rest.toLowerCase().startsWith(USER_URN_PREFIX)) rest = rest.slice(USER_URN_PREFIX.length);
  const invalidPath = () => new ScimError(400, `${JSON.stringify(text)} is not a path this server supports`, "invalidPath");
  const open = rest.indexOf("[");
  if (open >= 0) {
    const close = rest.lastIndexOf("]");
    if (close < open) throw invalidPath();
    const attr = rest.slice(0, open);
    const after = rest.slice(close + 1);
    if (!NAME.test(attr) || (after !== "" && !/^\.[A-Za-z][\w$-]*$/.test(after))) throw invalidPath();
    let filter: ScimFilter;
    try {
      filter = parseScimFilter(rest.slice(open + 1, close));
    } catch (err) {
      if (err instanceof ScimFilterError) throw new ScimError(400, `the filter of path ${JSON.stringify(text)} ${err.message}`, "invalidPath");
      throw err;
    }
    return { attr, filter, sub: after === "" ? undefined : after.slice(1) };
  }
  const [attr, sub, more] = rest.split(".");
  if (!attr || !NAME.test(attr) || more !== undefined || (sub !== undefined && !NAME.test(sub))) throw invalidPath();
  return { attr, sub };
}

/** The eq comparisons a filter joins by `and`: what a new element added through a filtered path carries. */
function impliedBy(filter: ScimFilter): Record<string, unknown> | undefined {
  if (filter.kind === "compare") return { [filter.attr]: filter.value };
  if (filter.kind === "or") return undefined;
  const left = impliedBy(filter.left);
  const right = impliedBy(filter.right);
  return left && right ? { ...left, ...right } : undefined;
}

type Op = "add" | "replace" | "remove";

/** Whether an operation's value makes an element primary (as a whole element, a list of them, or the sub-attribute). */
function makesPrimary(value: unknown, sub: string | undefined): boolean {
  const isTrue = (v: unknown) => v === true || (typeof v === "string" && v.toLowerCase() === "true");
  if (sub !== undefined) return sub.toLowerCase() === "primary" && isTrue(value);
  const elements = Array.isArray(value) ? value : [value];
  return elements.some((e) => isRecord(e) && isTrue(e[keyOf(e, "primary") ?? "primary"]));
}

function applyAt(user: Record<string, unknown>, op: Op, path: PatchPath, value: unknown, text: string): void {
  if (READ_ONLY.has(path.attr.toLowerCase())) throw new ScimError(400, `${path.attr} is read-only`, "mutability");
  const key = keyOf(user, path.attr) ?? path.attr;
  const current = user[key];
  // One primary value at most (RFC 7643 2.4): a new primary takes the flag from the others (RFC 7644 3.5.2).
  if (op !== "remove" && Array.isArray(current) && (path.filter || path.sub === undefined) && makesPrimary(value, path.sub)) {
    for (const e of current) if (isRecord(e)) delete e[keyOf(e, "primary") ?? "primary"];
  }
  const noTarget = () => new ScimError(400, `nothing matches the path ${JSON.stringify(text)}`, "noTarget");

  if (path.filter) {
    const filter = path.filter;
    const list = Array.isArray(current) ? (current as unknown[]) : [];
    const matching = list.filter((e): e is Record<string, unknown> => isRecord(e) && matchesScimFilter(filter, e));
    if (matching.length === 0) {
      // An add through a filter creates the element the filter describes (Entra ID adds emails this way).
      const implied = op === "add" ? impliedBy(filter) : undefined;
      if (!implied) throw noTarget();
      const element = path.sub ? { ...implied, [path.sub]: value } : isRecord(value) ? { ...implied, ...value } : undefined;
      if (!element) throw invalidValue(`the value of ${JSON.stringify(text)} must be an object`);
      user[key] = [...list, element];
      return;
    }
    if (op === "remove") {
      if (path.sub) for (const e of matching) delete e[keyOf(e, path.sub) ?? path.sub];
      else user[key] = list.filter((e) => !matching.includes(e as Record<string, unknown>));
      return;
    }
    if (path.sub) {
      for (const e of matching) e[keyOf(e, path.sub) ?? path.sub] = value;
      return;
    }
    if (!isRecord(value)) throw invalidValue(`the value of ${JSON.stringify(text)} must be an object`);
    user[key] = list.map((e) => (isRecord(e) && matching.includes(e) ? (op === "add" ? { ...e, ...value } : { ...value }) : e));
    return;
  }

  if (path.sub) {
    if (op === "remove") {
      if (isRecord(current)) delete current[keyOf(current, path.sub) ?? path.sub];
      return;
    }
    const parent = isRecord(current) ? current : (user[key] = {});
    parent[keyOf(parent, path.sub) ?? path.sub] = value;
    return;
  }

  if (op === "remove") {
    delete user[key];
  } else if (op === "add" && Array.isArray(current) && Array.isArray(value)) {
    user[key] = [...(current as unknown[]), ...(value as unknown[])];
  } else if (op === "add" && isRecord(current) && isRecord(value)) {
    user[key] = { ...current, ...value };
  } else {
    user[key] = value;
  }
}

/**
 * Applies a PatchOp body to a User (a copy of userOf's result) and returns the result. Operations apply in
 * order; any invalid one fails the whole request (RFC 7644 3.5.2: the PATCH is atomic).
 */
export function applyPatch(user: Record<string, unknown>, body: unknown): Record<string, unknown> {
  if (!isRecord(body)) throw invalidValue("the body must be a JSON object (a SCIM PatchOp)");
  const schemas = body.schemas;
  if (!Array.isArray(schemas) || !schemas.includes(PATCH_SCHEMA)) throw invalidValue(`schemas must be [${JSON.stringify(PATCH_SCHEMA)}]`);
  const operations = body[keyOf(body, "Operations") ?? "Operations"];
  if (!Array.isArray(operations) || operations.length === 0) throw invalidValue("Operations must be a non-empty list");
  const result = structuredClone(user);
  for (const [i, operation] of operations.entries()) {
    if (!isRecord(operation)) throw invalidValue(`Operations[${i}] must be an object`);
    const op = typeof operation.op === "string" ? operation.op.toLowerCase() : "";
    if (op !== "add" && op !== "replace" && op !== "remove") throw invalidValue(`Operations[${i}].op must be "add", "replace" or "remove"`);
    const value = operation.value;
    const path = operation.path;
    if (path !== undefined && typeof path !== "string") throw new ScimError(400, `Operations[${i}].path must be a string`, "invalidPath");
    if (path === undefined || path === "") {
      // No path: the value is an object of attributes (keys may themselves be paths, as Entra ID sends them).
      if (op === "remove") throw new ScimError(400, `Operations[${i}]: remove needs a path`, "noTarget");
      if (!isRecord(value)) throw invalidValue(`Operations[${i}].value must be an object when there is no path`);
      for (const [k, v] of Object.entries(value)) applyAt(result, op, parsePath(k), v, k);
    } else {
      if (op !== "remove" && value === undefined) throw invalidValue(`Operations[${i}].value is required`);
      applyAt(result, op, parsePath(path), value, path);
    }
  }
  return result;
}
