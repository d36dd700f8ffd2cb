// The REST gateway: REST/JSON requests transcoded into calls of the same Connect methods, driven by the
// google.api.http rules of the descriptors. The route table is compiled once; a request is routed, turned
// into the method's input message (body, then query, then path variables), and the method is invoked in
// process with that message through the server's own interceptors (the ones every protocol runs), so every
// rule holds for REST as for the other protocols. The answer is converted once, message to JSON.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import {
  create,
  ScalarType,
  mergeFromJson,
  type DescField,
  type DescMessage,
  type DescMethod,
  type DescMethodUnary,
  type JsonObject,
  type JsonValue,
  type Message,
  type Registry,
} from "@bufbuild/protobuf";
import { FieldMaskSchema } from "@bufbuild/protobuf/wkt";
import { type Interceptor } from "@connectrpc/connect";
import { bearerChallenge } from "../kernel/authorization-header.js";
import { httpRuleOf } from "../kernel/descriptors.js";
import { CallControl, cappedGrpcTimeoutMs, CLIENT_GONE, clientGone, invokeInProcess, procedureOf, type UnaryImplSpec } from "../kernel/invoke.js";
import { callContextValues, callHeaders, type RequestRecord } from "../kernel/request.js";
import {
  errorDomainOf,
  invalidArgument,
  malformedTimeout,
  methodNotAllowed,
  payloadTooLarge,
  routeNotFound,
  toRestError,
  unimplemented,
} from "../kernel/errors/index.js";
import {
  applyBody,
  defaultMaxBodyBytes,
  deriveUpdateMask,
  formBodyRefused,
  isFormEncoded,
  parseFormBody,
} from "./body.js";
import { BodyAbortedError, BodyTooLargeError, parseJsonBody, readBody } from "../kernel/http-body.js";
import { fieldByName, isPlainObject, isWellKnown, locateJsonError } from "./fields.js";
import { createJsonWriter } from "./json.js";
import { applyQuery, insert, textToJson, type BoundFields } from "./query.js";
import { createRouteTable } from "./router.js";
import { parseTemplate, PathEncodingError, splitRequestPath } from "./template.js";

interface RestGatewayOptions {
  /**
   * The unary methods' implementations (kernel/invoke.ts unaryImplementationsOf): the same the server
   * serves, called behind the same `interceptors`, so every rule holds for REST too. REST responses emit
   * default-valued fields.
   */
  implementations: ReadonlyMap<string, UnaryImplSpec>;
  interceptors: Interceptor[];
  /** The methods to expose (servedMethods). Methods without an HTTP rule, or not unary, are skipped. */
  methods: readonly DescMethod[];
  /** For JSON (Any) and error details. */
  registry: Registry;
  /** For ErrorInfo.domain of errors the gateway raises itself. */
  serviceDomain: string;
  /** Largest request body read, in bytes (default 4 MiB); larger -> 413. */
  maxBodyBytes?: number;
  /**
   * The server's deadline of a call (REQUEST_TIMEOUT_MS). A client may ask for a shorter one with a
   * grpc-timeout header, as grpc-gateway reads it; a longer one leaves the server's.
   */
  requestTimeoutMs: number;
}

interface RestRoute {
  method: DescMethod;
  verb: string;
  template: string;
}

export interface RestGateway {
  /**
   * Answers any request. Unknown paths -> 404; never rejects. `record` (the server's record of the request)
   * learns the route and the outcome, and its id goes into every error's ErrorInfo.
   */
  handle(req: IncomingMessage | Http2ServerRequest, res: ServerResponse | Http2ServerResponse, record?: RequestRecord): Promise<void>;
  routes: ReadonlyArray<RestRoute>;
}

/** A path variable, resolved to its field path. */
interface Variable {
  /** The dotted path as written in the template (the key of the match result). */
  key: string;
  fields: DescField[];
  /**
   * The field when the path is one singular string field outside any oneof (the uid of most paths): set to
   * the text as it is, as JSON parsing would set it, without a JSON merge.
   */
  plainString: DescField | undefined;
}

/** Where a derived update mask goes and what it is relative to. */
interface MaskPlan {
  maskField: DescField;
  /** The resource field the mask paths are relative to; undefined: the request itself. */
  resource: DescField | undefined;
  /** Paths (relative to the resource) bound by the URL path: identifiers, never part of a derived mask. */
  exclude: string[];
}

/** Everything a request needs about its route, computed once. */
interface Binding {
  method: DescMethodUnary;
  verb: string;
  template: string;
  variables: Variable[];
  body: DescField | "*" | undefined;
  bound: BoundFields;
  mask: MaskPlan | undefined;
  served: boolean;
}

/** Minimal response surface shared by node:http and node:http2 compat responses. */
interface ResponseLike {
  statusCode: number;
  readonly headersSent: boolean;
  readonly writableEnded: boolean;
  setHeader(name: string, value: string): unknown;
  end(data: string | Uint8Array): unknown;
  once(event: "close", listener: () => void): unknown;
  off(event: "close", listener: () => void): unknown;
}

/** Request headers never forwarded to the call, and response headers never copied back. */
const hopByHop = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "http2-settings",
  "expect",
  "host",
  "content-type",
  "content-length",
  "content-encoding",
  "accept-encoding",
  "x-grpc-web",
]);

function isProtocolHeader(name: string): boolean {
  return name.startsWith(":") || hopByHop.has(name) || name.startsWith("connect-") || name.startsWith("grpc-");
}

export function createRestGateway(opts: RestGatewayOptions): RestGateway {
  const { registry, serviceDomain } = opts;
  const maxBodyBytes = opts.maxBodyBytes ?? defaultMaxBodyBytes;
  const specs = opts.implementations;
  const served = new Set(specs.keys());
  const bindings = opts.methods.flatMap((m) => bindingsOf(m, served));
  const table = createRouteTable(bindings.map((b) => ({ verb: b.verb, template: b.template, target: b })));
  const { interceptors } = opts;
  const writeJson = createJsonWriter(registry);

  /**
   * Invokes the method in process with the request message, through the interceptors (kernel/invoke.ts): no
   * request encoding or parsing, no response stream. Resolves with the headers the method set and the JSON
   * body; rejects with the method's error, carrying those headers.
   */
  async function invoke(
    b: Binding,
    message: Message,
    req: IncomingMessage | Http2ServerRequest,
    control: CallControl,
    record: RequestRecord | undefined,
  ): Promise<{ header: Headers; body: string }> {
    const spec = specs.get(procedureOf(b.method))!;
    const timeout = req.headers["grpc-timeout"];
    const timeoutMs = cappedGrpcTimeoutMs(timeout, opts.requestTimeoutMs);
    if (Number.isNaN(timeoutMs)) throw malformedTimeout("grpc-timeout", String(timeout));
    // The headers a call over Connect JSON would carry, as interceptors and handlers see them: the client's
    // but hop-by-hop, host, content and protocol headers.
    const requestHeader = callHeaders(req.headers, isProtocolHeader, JSON_CALL_HEADERS);
    const contextValues = callContextValues(req, record);
    const result = await invokeInProcess(
      spec,
      { method: b.method, protocolName: "rest", requestMethod: b.verb, url: `http://rest-gateway.internal/${procedureOf(b.method)}`, control, timeoutMs, requestHeader, contextValues },
      message,
      interceptors,
    );
    if (!result.ok) {
      // The error carries the headers and trailers the method set.
      const err = result.error;
      result.responseHeader.forEach((value, name) => {
        if (!err.metadata.has(name)) err.metadata.set(name, value);
      });
      result.responseTrailer.forEach((value, name) => err.metadata.append(name, value));
      throw err;
    }
    const body = writeJson(b.method.output, result.output);
    const header = new Headers(result.responseHeader);
    result.responseTrailer.forEach((value, name) => header.append(name, value));
    return { header, body };
  }

  /** The path without its trailing slashes when that is a route for the verb (the hint of a 404), else undefined. */
  function trailingSlashFree(verb: string, pathname: string): string | undefined {
    if (!/.\/$/.test(pathname)) return undefined;
    const trimmed = pathname.replace(/\/+$/, "");
    return trimmed !== "" && table.match(verb, splitRequestPath(trimmed)).kind === "match" ? trimmed : undefined;
  }

  /**
   * Builds the input message: body, then query parameters, then path variables (which win). As grpc-gateway
   * does: a binding without a body reads a form-encoded body (POST, PUT, PATCH; Go's ParseForm) as parameters
   * like the query's, before them (a single field named in both is refused, a repeated one takes both); a
   * binding with a body reads it as JSON whatever its content type (`curl -d '{...}'` labels JSON a form),
   * and a form that is not JSON is refused saying so.
   */
  async function buildRequest(b: Binding, vars: Map<string, string>, search: string, req: IncomingMessage | Http2ServerRequest): Promise<Message> {
    const input = b.method.input;
    const message = create(input) as Message;
    let bodyJson: JsonValue | undefined;
    const form = isFormEncoded(req.headers["content-type"]);
    if (b.body !== undefined) {
      const bytes = await readBody(req, maxBodyBytes);
      try {
        bodyJson = parseJsonBody(bytes);
      } catch (err) {
        throw form ? formBodyRefused() : err;
      }
      if (bodyJson !== undefined) applyBody(input, message, b.body, bodyJson, registry);
    }
    const params: Array<[string, string]> = form && b.body === undefined && FORM_VERBS.has(b.verb) ? [...parseFormBody(await readBody(req, maxBodyBytes))] : [];
    if (search !== "") params.push(...new URLSearchParams(search));
    const fromQuery = params.length === 0 ? new Set<string>() : applyQuery(input, message, params, b.bound, registry);
    applyPathVariables(input, message, b.variables, vars, registry);
    if (b.mask && bodyJson !== undefined && !fromQuery.has("update_mask")) applyDerivedMask(input, message, b, b.mask, bodyJson);
    return message;
  }

  async function serve(req: IncomingMessage | Http2ServerRequest, res: ResponseLike, control: CallControl, record: RequestRecord | undefined): Promise<void> {
    const verb = (req.method ?? "GET").toUpperCase();
    const { pathname, search } = splitUrl(req.url ?? "/");
    let binding: Binding | undefined;
    try {
      const result = table.match(verb, splitRequestPath(pathname));
      if (result.kind === "not-found") throw routeNotFound(verb, pathname, trailingSlashFree(verb, pathname));
      if (result.kind === "method-not-allowed") throw methodNotAllowed(verb, pathname, result.allowed);
      binding = result.route.target;
      if (record) {
        record.service = binding.method.parent.typeName;
        record.method = binding.method.name;
        record.route = binding.template;
      }
      if (!binding.served) throw unimplemented(`${procedureOf(binding.method)} is not implemented by this server`);
      const message = await buildRequest(binding, result.variables, search, req);
      const response = await invoke(binding, message, req, control, record);
      copyHeaders(res, response.header);
      send(res, 200, response.body);
    } catch (err) {
      // The client went away: there is no one to answer.
      if (err instanceof BodyAbortedError || clientGone(control)) return;
      // HTTP/1.1: close the connection rather than read the rest of an oversized body.
      if (err instanceof BodyTooLargeError && req.httpVersionMajor === 1) res.setHeader("connection", "close");
      sendError(req, res, gatewayCause(err), binding?.method, record);
    }
  }

  /**
   * Answers with the REST form of the error: its status, its headers (Allow, a method's), google.rpc.Status;
   * a 401 says how to authenticate (WWW-Authenticate).
   */
  function sendError(req: IncomingMessage | Http2ServerRequest, res: ResponseLike, err: unknown, method: DescMethod | undefined, record: RequestRecord | undefined): void {
    const rest = toRestError(err, errorDomainOf(method, serviceDomain), registry, record?.id);
    if (record) record.code = rest.code;
    copyHeaders(res, rest.headers);
    if (rest.status === 401) res.setHeader("www-authenticate", bearerChallenge(req.headers.authorization));
    send(res, rest.status, rest.body);
  }

  return {
    routes: table.routes.map((r) => ({ method: r.target.method, verb: r.verb, template: r.template.source })),
    async handle(req, res, record) {
      const out: ResponseLike = res;
      const control = new CallControl();
      const onClose = () => {
        if (!out.writableEnded) control.abort(CLIENT_GONE);
      };
      try {
        out.once("close", onClose);
        await serve(req, out, control, record);
      } catch (err) {
        // Only reached when writing the error response itself failed: nothing more can be sent.
        lastResort(out, err, serviceDomain, registry);
      } finally {
        out.off("close", onClose);
      }
    },
  };
}

/** A REST binding as the gateway compiles it: what the OpenAPI document describes (openapi.ts). */
export interface RestBindingDescription {
  method: DescMethodUnary;
  /** Upper-case HTTP method. */
  verb: string;
  template: string;
  /** The path variables, resolved to their fields. */
  variables: ReadonlyArray<{ key: string; fields: DescField[] }>;
  /** The body: the whole request ("*"), one field, or none. */
  body: DescField | "*" | undefined;
  bound: BoundFields;
}

/** The REST bindings of these methods, compiled as the gateway compiles its route table. */
export function describeRestBindings(methods: readonly DescMethod[]): RestBindingDescription[] {
  return methods.flatMap((m) => bindingsOf(m, new Set()));
}

/** The bindings of a unary method with an HTTP rule: the rule and its additional bindings. */
function bindingsOf(method: DescMethod, served: ReadonlySet<string>): Binding[] {
  const rule = httpRuleOf(method);
  if (!rule || method.methodKind !== "unary") return [];
  const unary = method as DescMethodUnary;
  const out: Binding[] = [];
  for (const r of [rule, ...rule.additionalBindings]) {
    const pattern = r.pattern;
    if (pattern.case === undefined) continue;
    const [verb, template] = pattern.case === "custom" ? [pattern.value.kind, pattern.value.path] : [pattern.case, pattern.value];
    out.push(compileBinding(unary, verb.toUpperCase(), template, r.body, served.has(procedureOf(method))));
  }
  return out;
}

/** Resolves the template variables and the body field; throws (at start-up) when the rule names a bad field. */
function compileBinding(method: DescMethodUnary, verb: string, template: string, bodyName: string, served: boolean): Binding {
  const input = method.input;
  const where = `${procedureOf(method)} (${verb} ${template})`;
  const variables = parseTemplate(template).variables.map((v) => {
    const fields = resolveFields(input, v.fieldPath, where);
    const leaf = fields[fields.length - 1]!;
    if (leaf.fieldKind !== "scalar" && leaf.fieldKind !== "enum") throw new Error(`${where}: path variable ${v.fieldPath.join(".")} is not a scalar field`);
    return { key: v.fieldPath.join("."), fields, plainString: plainStringField(fields) };
  });
  const body = bodyName === "" ? undefined : bodyName === "*" ? "*" : resolveFields(input, [bodyName], where)[0]!;
  const bound: BoundFields = {
    path: variables.map((v) => v.fields.map((f) => f.name)),
    body: body === undefined ? undefined : body === "*" ? [] : [body.name],
  };
  return { method, verb, template, variables, body, bound, mask: maskPlanOf(input, verb, body, variables), served };
}

function resolveFields(input: DescMessage, path: readonly string[], where: string): DescField[] {
  const fields: DescField[] = [];
  let desc: DescMessage | undefined = input;
  for (const name of path) {
    const field: DescField | undefined = desc ? fieldByName(desc, name) : undefined;
    if (!field) throw new Error(`${where}: ${input.typeName} has no field ${path.join(".")}`);
    fields.push(field);
    desc = field.fieldKind === "message" ? field.message : undefined;
  }
  return fields;
}

/**
 * A PATCH whose request has a google.protobuf.FieldMask update_mask gets the mask derived from the body
 * when the client sends none. The resource is the body field, or for body "*" the request's only
 * (non-well-known) message field besides the mask.
 */
function maskPlanOf(input: DescMessage, verb: string, body: DescField | "*" | undefined, variables: Variable[]): MaskPlan | undefined {
  const maskField = fieldByName(input, "update_mask");
  if (verb !== "PATCH" || body === undefined || !maskField || maskField.oneof) return undefined;
  if (maskField.fieldKind !== "message" || maskField.message.typeName !== FieldMaskSchema.typeName) return undefined;
  let resource: DescField | undefined;
  if (body === "*") {
    const candidates = input.fields.filter((f) => f !== maskField && f.fieldKind === "message" && !isWellKnown(f.message));
    resource = candidates.length === 1 ? candidates[0] : undefined;
  } else {
    if (body.fieldKind !== "message") return undefined;
    resource = body;
  }
  const exclude = variables
    .map((v) => v.fields.map((f) => f.name))
    .filter((names) => resource === undefined || names[0] === resource.name)
    .map((names) => (resource === undefined ? names : names.slice(1)).join("."));
  return { maskField, resource, exclude };
}

/** Sets the path variables on the message; a value that does not parse -> INVALID_ARGUMENT naming its field. */
function applyPathVariables(input: DescMessage, message: Message, variables: readonly Variable[], values: Map<string, string>, registry: Registry): void {
  if (variables.length === 0) return;
  const tree: JsonObject = {};
  let parsed = false;
  for (const v of variables) {
    const text = values.get(v.key) ?? "";
    if (v.plainString) (message as unknown as Record<string, string>)[v.plainString.localName] = text;
    else {
      insert(tree, v.fields, textToJson(v.fields[v.fields.length - 1]!, text));
      parsed = true;
    }
  }
  if (!parsed) return;
  try {
    mergeFromJson(input, message, tree, { registry });
  } catch {
    throw invalidArgument(locateJsonError(input, tree, "", { registry }, "path"));
  }
}

/** The field of a path of one singular string field outside any oneof; undefined for any other path. */
function plainStringField(fields: readonly DescField[]): DescField | undefined {
  const f = fields.length === 1 ? fields[0]! : undefined;
  return f !== undefined && f.fieldKind === "scalar" && f.scalar === ScalarType.STRING && f.oneof === undefined ? f : undefined;
}

/** Sets update_mask from the keys of the resource in the body, unless the body names a mask itself. */
function applyDerivedMask(input: DescMessage, message: Message, b: Binding, plan: MaskPlan, bodyJson: JsonValue): void {
  if (!isPlainObject(bodyJson)) return;
  let resourceJson: JsonValue | undefined = bodyJson;
  if (b.body === "*") {
    if (Object.keys(bodyJson).some((k) => fieldByName(input, k) === plan.maskField)) return;
    if (plan.resource) resourceJson = bodyJson[plan.resource.jsonName] ?? bodyJson[plan.resource.name];
  }
  if (!isPlainObject(resourceJson)) return;
  const resourceDesc = plan.resource?.fieldKind === "message" ? plan.resource.message : input;
  const paths = deriveUpdateMask(resourceDesc, resourceJson, plan.exclude);
  if (paths.length === 0) return;
  (message as unknown as Record<string, unknown>)[plan.maskField.localName] = create(FieldMaskSchema, { paths });
}

/** Splits "/a/b?x=1" into path and query (an absolute-form URL is reduced to its path). */
function splitUrl(url: string): { pathname: string; search: string } {
  let target = url;
  if (!target.startsWith("/")) {
    try {
      const parsed = new URL(target);
      target = parsed.pathname + parsed.search;
    } catch {
      target = "/" + target;
    }
  }
  const q = target.indexOf("?");
  return q < 0 ? { pathname: target, search: "" } : { pathname: target.slice(0, q), search: target.slice(q + 1) };
}

/** Copies the non-protocol headers a method set onto the REST response. */
function copyHeaders(res: ResponseLike, headers: Headers): void {
  headers.forEach((value, name) => {
    if (isProtocolHeader(name)) return;
    try {
      res.setHeader(name, value);
    } catch {
      // A header this transport cannot carry (HTTP/2 forbids some): dropped.
    }
  });
}

/** The error a failure of the gateway's own reading stands for. */
function gatewayCause(err: unknown): unknown {
  if (err instanceof BodyTooLargeError) return payloadTooLarge(err.limit);
  if (err instanceof PathEncodingError) return invalidArgument({ field: "path", description: err.message });
  return err;
}

/** The verbs whose form-encoded body Go's ParseForm reads (and so grpc-gateway's bindings without a body). */
const FORM_VERBS: ReadonlySet<string> = new Set(["POST", "PUT", "PATCH"]);

/** What a call over Connect JSON would say of its content, over the client's own headers. */
const JSON_CALL_HEADERS: ReadonlyMap<string, string> = new Map([
  ["content-type", "application/json"],
  ["connect-protocol-version", "1"],
]);

function send(res: ResponseLike, status: number, body: string | Uint8Array): void {
  if (res.headersSent || res.writableEnded) return;
  res.statusCode = status;
  res.setHeader("content-type", "application/json");
  // Said, not left to the transport: the access line reads the size of what was sent from it.
  res.setHeader("content-length", String(typeof body === "string" ? Buffer.byteLength(body) : body.byteLength));
  res.end(body);
}

/** Writing a response failed: log through the boundary and end the response if still possible. */
function lastResort(res: ResponseLike, err: unknown, serviceDomain: string, registry: Registry): void {
  try {
    send(res, 500, toRestError(err, serviceDomain, registry).body);
  } catch {
    try {
      if (!res.writableEnded) res.end("");
    } catch {
      // The connection is gone.
    }
  }
}
