// The SCIM 2.0 endpoint of each identity provider (RFC 7643, 7644): `<issuer>/scim/v2/<provider uid>/Users`
// and `.../Users/<id>`, on the server's one port but on the protocol's own paths and in its own shapes
// (application/scim+json, SCIM error bodies), outside the API contract.
//
// Authentication: `Authorization: Bearer <SCIM token>` of that provider (scim.store.ts: its sha256 is the live
// token's, unexpired, or the previous one's within the overlap, and SCIM is enabled). Anything else, a token
// of another provider included, is 401 with no hint of what exists.
//
// A User is an identity the provider created: under its group, carrying the provider and the externalId,
// bound to the provider's default role when created. `active: false` and delete take its access away at once:
// the identity is granted nothing (iam/directory.ts), and this server forgets cached grants before answering
// (the database's notification tells the other servers).
import type http from "node:http";
import type http2 from "node:http2";
import { Code } from "@connectrpc/connect";
import type { Db } from "../db/client.js";
import type { IdentityRow } from "../db/schema/index.js";
import { bearerTokenOf } from "../kernel/authorization-header.js";
import { BodyTooLargeError, readBody } from "../kernel/http-body.js";
import { isConnectionError, isUniqueViolation, sqlStateOf } from "../kernel/errors/index.js";
import { registry } from "../kernel/descriptors.js";
import { log } from "../kernel/log.js";
import type { RequestRecord } from "../kernel/request.js";
import { unstorableJson } from "../kernel/stored-json.js";
import { isValidUid } from "../kernel/uidp.js";
import { runUnitOfWork, type UnitOfWork } from "../kernel/unit-of-work.js";
import { parseScimFilter, ScimFilterError } from "./scim.filter.js";
import { applyPatch, LIST_SCHEMA, ScimError, scimIdOf, userFields, userOf, userResource } from "./scim.mapper.js";
import { createScimStore, filterCondition, type ScimProvider } from "./scim.store.js";
import { scimTokenHash } from "./scim-token.js";

export const SCIM_PATH_PREFIX = "/scim/v2/";
const SCIM_CONTENT_TYPE = "application/scim+json; charset=utf-8";
/** Users per list page when the client does not say, and at most. */
const DEFAULT_COUNT = 100;
const MAX_COUNT = 200;
const SCIM_ID = /^[0-9a-f]{16}$/;

type Request = http.IncomingMessage | http2.Http2ServerRequest;
type Response = http.ServerResponse | http2.Http2ServerResponse;

export interface ScimRoutesOptions {
  db: Db;
  /** This server's issuer URL: the base of each provider's SCIM endpoint URL. */
  issuerUrl: string;
  /** The largest body read. */
  maxBodyBytes: number;
  /** Forgets the grants this server remembers: runs after every write, before its response. */
  grantsChanged: () => void;
}

/** The SCIM endpoint URL of a provider (what IdentityProvider.scim.endpoint_url reports). */
export function scimEndpointUrl(issuerUrl: string, providerUid: string): string {
  return `${issuerUrl}${SCIM_PATH_PREFIX}${providerUid}`;
}

/** `<provider uid>/<resource>[/<id>]` split; undefined when the path names no resource this endpoint serves. */
function route(path: string): { providerUid: string; resource: "Users" | "ServiceProviderConfig"; id: string | undefined; extra: boolean } | undefined {
  const segments = path.slice(SCIM_PATH_PREFIX.length).split("/");
  // Uid segments are hex: a resource name can never be one of them.
  const at = segments.findIndex((s) => s === "Users" || s === "ServiceProviderConfig");
  if (at < 1) return undefined;
  return {
    providerUid: segments.slice(0, at).join("/"),
    resource: segments[at] as "Users" | "ServiceProviderConfig",
    id: segments[at + 1],
    extra: segments.length > at + 2,
  };
}

function integerParam(params: URLSearchParams, name: string): number | undefined {
  const raw = params.get(name);
  if (raw === null || raw === "") return undefined;
  if (!/^-?\d{1,9}$/.test(raw)) throw new ScimError(400, `${name} must be an integer`, "invalidValue");
  return Number(raw);
}

const SERVICE_PROVIDER_CONFIG = {
  schemas: ["urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig"],
  patch: { supported: true },
  bulk: { supported: false, maxOperations: 0, maxPayloadSize: 0 },
  filter: { supported: true, maxResults: MAX_COUNT },
  changePassword: { supported: false },
  sort: { supported: false },
  etag: { supported: false },
  authenticationSchemes: [
    { type: "oauthbearertoken", name: "SCIM token", description: "Authorization: Bearer <the provider's SCIM token>", primary: true },
  ],
};

/** The code an access line and the metrics give a SCIM answer (its status read as the API's HTTP mapping). */
function codeOfStatus(status: number): Code {
  if (status < 400) return 0 as Code;
  const known: Record<number, Code> = {
    400: Code.InvalidArgument,
    401: Code.Unauthenticated,
    403: Code.PermissionDenied,
    404: Code.NotFound,
    405: Code.Unimplemented,
    409: Code.AlreadyExists,
    413: Code.ResourceExhausted,
    503: Code.Unavailable,
  };
  return known[status] ?? (status < 500 ? Code.InvalidArgument : Code.Internal);
}

export function createScimRoutes(opts: ScimRoutesOptions) {
  const store = createScimStore(opts.db);
  /** The request record of each response being answered (its code set when the answer is sent). */
  const records = new WeakMap<Response, RequestRecord>();

  const send = (res: Response, status: number, body: unknown, headers: Record<string, string> = {}) => {
    const record = records.get(res);
    if (record) record.code = codeOfStatus(status);
    const r = res as http.ServerResponse;
    if (body === undefined) {
      r.writeHead(status, headers).end();
      return;
    }
    r.writeHead(status, { "content-type": SCIM_CONTENT_TYPE, "cache-control": "no-store", ...headers }).end(JSON.stringify(body));
  };
  const sendError = (res: Response, err: ScimError) =>
    send(res, err.status, err.body(), err.status === 401 ? { "www-authenticate": 'Bearer realm="scim"' } : err.status === 405 ? { allow: "GET, POST, PUT, PATCH, DELETE" } : {});

  const readJson = async (req: Request): Promise<unknown> => {
    let bytes: Buffer;
    try {
      bytes = await readBody(req as http.IncomingMessage, opts.maxBodyBytes);
    } catch (err) {
      if (err instanceof BodyTooLargeError) throw new ScimError(413, `the body is larger than ${err.limit} bytes`);
      throw err;
    }
    let body: unknown;
    try {
      body = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
    } catch {
      throw new ScimError(400, "the body is not valid JSON", "invalidSyntax");
    }
    // What the database cannot hold is the request's fault, found before any query: 400, never a 500.
    const unstorable = unstorableJson(body);
    if (unstorable) throw new ScimError(400, `the body cannot be stored: ${unstorable}`, "invalidValue");
    return body;
  };

  /** A write as a unit of work under the provider's lock; cached grants forgotten before the answer. */
  const write = <T>(providerUid: string, hash: string, fn: (unit: UnitOfWork, provider: ScimProvider) => Promise<T>): Promise<T> =>
    runUnitOfWork({ db: opts.db, registry, grantsChanged: opts.grantsChanged }, async (unit) => fn(unit, await store.lockProvider(unit, providerUid, hash)));

  async function serve(req: Request, res: Response, path: string, query: string): Promise<void> {
    const r = route(path);
    if (!r || r.extra || (r.resource === "ServiceProviderConfig" && r.id !== undefined)) throw new ScimError(404, `no SCIM resource at ${path}`);
    const token = bearerTokenOf(req.headers.authorization);
    // Every refusal looks the same: whether the provider exists is not the caller's to learn.
    const refused = new ScimError(401, "a valid SCIM token of this identity provider is required (Authorization: Bearer <token>)");
    if (!token || token.length > 1024 || !isValidUid(r.providerUid)) throw refused;
    const hash = scimTokenHash(token);
    const provider = await store.authenticate(r.providerUid, hash);
    if (!provider) throw refused;

    const base = scimEndpointUrl(opts.issuerUrl, provider.uid) + "/Users";
    const resource = (row: IdentityRow) => userResource(row, `${base}/${scimIdOf(row.uid)}`);
    const method = req.method ?? "";
    const notAllowed = () => new ScimError(405, `${method} is not allowed on ${path}`);

    if (r.resource === "ServiceProviderConfig") {
      if (method !== "GET") throw notAllowed();
      return send(res, 200, SERVICE_PROVIDER_CONFIG);
    }

    if (r.id === undefined || r.id === "") {
      if (method === "GET") {
        const params = new URLSearchParams(query);
        const filterText = params.get("filter");
        let where;
        if (filterText !== null && filterText.trim() !== "") {
          try {
            where = filterCondition(parseScimFilter(filterText), provider.groupUid);
          } catch (err) {
            if (err instanceof ScimFilterError) throw new ScimError(400, `filter: ${err.message}`, "invalidFilter");
            throw err;
          }
        }
        const startIndex = Math.max(1, integerParam(params, "startIndex") ?? 1);
        const count = Math.min(MAX_COUNT, Math.max(0, integerParam(params, "count") ?? DEFAULT_COUNT));
        const { rows, total } = await store.list(provider, where, startIndex - 1, count);
        return send(res, 200, { schemas: [LIST_SCHEMA], totalResults: total, startIndex, itemsPerPage: rows.length, Resources: rows.map(resource) });
      }
      if (method === "POST") {
        const fields = userFields(await readJson(req));
        const row = await write(provider.uid, hash, (unit, p) => store.create(unit, p, fields));
        const body = resource(row);
        return send(res, 201, body, { location: (body.meta as { location: string }).location });
      }
      throw notAllowed();
    }

    const id = r.id;
    const missing = () => new ScimError(404, `no user ${JSON.stringify(id)} at this identity provider`);
    if (!SCIM_ID.test(id)) {
      if (["GET", "PUT", "PATCH", "DELETE"].includes(method)) throw missing();
      throw notAllowed();
    }
    switch (method) {
      case "GET": {
        const row = await store.get(provider, id);
        if (!row) throw missing();
        return send(res, 200, resource(row));
      }
      case "PUT": {
        const fields = userFields(await readJson(req));
        const row = await write(provider.uid, hash, async (unit, p) => {
          const current = await store.lock(unit, p, id);
          if (!current) throw missing();
          return store.replace(unit, p, current, fields);
        });
        return send(res, 200, resource(row));
      }
      case "PATCH": {
        const body = await readJson(req);
        const row = await write(provider.uid, hash, async (unit, p) => {
          const current = await store.lock(unit, p, id);
          if (!current) throw missing();
          const fields = userFields(applyPatch(userOf(current), body));
          return store.replace(unit, p, current, { ...fields, active: fields.active ?? current.active });
        });
        return send(res, 200, resource(row));
      }
      case "DELETE": {
        const deleted = await write(provider.uid, hash, (unit, p) => store.delete(unit, p, id));
        if (!deleted) throw missing();
        return send(res, 204, undefined);
      }
      default:
        throw notAllowed();
    }
  }

  return {
    handles: (path: string) => path.startsWith(SCIM_PATH_PREFIX),
    async handle(req: Request, res: Response, path: string, query: string, record?: RequestRecord): Promise<void> {
      if (record) records.set(res, record);
      try {
        await serve(req, res, path, query);
      } catch (err) {
        if (err instanceof ScimError) return sendError(res, err);
        // A login through the provider created the same externalId between the check and the insert.
        if (isUniqueViolation(err)) return sendError(res, new ScimError(409, "another user of this provider has this externalId", "uniqueness"));
        // A value the database refuses (a data exception, SQLSTATE class 22) is the request's fault.
        if (sqlStateOf(err)?.startsWith("22")) {
          log.warn("scim: a value the database refused", { path, method: req.method, sqlState: sqlStateOf(err) });
          return sendError(res, new ScimError(400, "a value cannot be stored", "invalidValue"));
        }
        if (isConnectionError(err)) {
          log.warn("scim: database unavailable", { path, err });
          return sendError(res, new ScimError(503, "the service is unavailable; retry later"));
        }
        log.error("scim request failed", { path, method: req.method, err });
        sendError(res, new ScimError(500, "internal error"));
      }
    },
  };
}
