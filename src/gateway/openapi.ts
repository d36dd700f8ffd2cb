// The OpenAPI 3.1 document of the REST API, generated from the descriptors when the server starts (never
// written by hand, so never stale). It describes what the gateway accepts, from the same sources: the routes
// are the gateway's own compiled bindings (describeRestBindings), the query parameters are listed by the
// rules that read them (queryParameters), and the schemas follow the proto3 JSON mapping protobuf-es reads
// and writes (int64 as a string, Timestamp as RFC 3339, enums by name, bytes as base64).
//
// Proto comments are not available here: protoc-gen-es strips source info from the embedded descriptors.
// Descriptions are therefore built from what the descriptors do carry (field behaviours, oneofs, the
// authorization rule, the RPC name).
import { ScalarType, type DescEnum, type DescField, type DescMessage, type DescMethod, type DescService } from "@bufbuild/protobuf";
import type { AuthRule } from "../../gen/apiserver/options/v1/options_pb.js";
import { Capability } from "../../gen/capabilities/capabilities_pb.js";
import { file_google_rpc_error_details } from "../../gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../../gen/google/rpc/status_pb.js";
import { authRuleOf, behaviorsOf, FieldBehavior, scopePathOf } from "../kernel/descriptors.js";
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from "../kernel/list/index.js";
import { describeRestBindings, type RestBindingDescription } from "./gateway.js";
import { jsonMessageOf, queryParameters } from "./query.js";
import { parseTemplate } from "./template.js";

/** A JSON Schema (2020-12, the dialect of OpenAPI 3.1) or a reference. */
export type Schema = { [key: string]: unknown };

/** The OpenAPI document, as plain JSON. */
export interface OpenApiDocument {
  openapi: "3.1.0";
  info: { title: string; version: string; description?: string };
  servers: Array<{ url: string; description?: string }>;
  security: Array<Record<string, string[]>>;
  tags: Array<{ name: string; description?: string }>;
  paths: Record<string, Record<string, Operation>>;
  components: {
    schemas: Record<string, Schema>;
    responses: Record<string, unknown>;
    securitySchemes: Record<string, unknown>;
  };
}

export interface Operation {
  operationId: string;
  summary: string;
  description: string;
  tags: string[];
  parameters?: Parameter[];
  requestBody?: { required: boolean; content: { "application/json": { schema: Schema } } };
  responses: Record<string, unknown>;
  security?: Array<Record<string, string[]>>;
  deprecated?: boolean;
}

export interface Parameter {
  name: string;
  in: "path" | "query";
  required: boolean;
  description?: string;
  schema: Schema;
  style?: string;
  explode?: boolean;
  example?: unknown;
  deprecated?: boolean;
}

interface OpenApiOptions {
  /** The methods to describe (servedMethods); those without an HTTP rule, or not unary, are skipped. */
  methods: readonly DescMethod[];
  title?: string;
  version?: string;
}

const BEARER = "bearerAuth";
const ERROR_RESPONSE = "Error";
const ANY_TYPE_PREFIX = "type.googleapis.com/";

/** Field behaviours, decoded once per field (an option is decoded from bytes on every read). */
const behaviourCache = new WeakMap<DescField, ReadonlySet<FieldBehavior>>();
function has(field: DescField, behaviour: FieldBehavior): boolean {
  let set = behaviourCache.get(field);
  if (!set) {
    set = new Set(behaviorsOf(field));
    behaviourCache.set(field, set);
  }
  return set.has(behaviour);
}
const isRequired = (f: DescField) => has(f, FieldBehavior.REQUIRED);
const isOutputOnly = (f: DescField) => has(f, FieldBehavior.OUTPUT_ONLY);
const isImmutable = (f: DescField) => has(f, FieldBehavior.IMMUTABLE);

/** Builds the document. Throws (at start-up) when a binding cannot be described. */
export function createOpenApiDocument(opts: OpenApiOptions): OpenApiDocument {
  const schemas = new SchemaBuilder();
  const bindings = describeRestBindings(opts.methods);
  const tagOf = serviceTags(bindings.map((b) => b.method.parent));
  const paths: OpenApiDocument["paths"] = {};
  const pathNames = new PathNames();
  const operationIds = new Set<string>();
  const methodNames = countBy(bindings.map((b) => b.method), (m) => m.name);
  // GET operations' names first: where a URL carries several sets of names, reads get the plain path.
  for (const b of bindings) if (b.verb === "GET") pathNames.of(b);
  for (const b of bindings) {
    const { path, names, plain } = pathNames.of(b);
    const tag = tagOf.get(b.method.parent)!;
    const operationId = operationIdOf(b, methodNames, operationIds);
    const operation = describeOperation(b, operationId, tag, names, schemas);
    if (path !== plain) {
      operation.description +=
        `\n\nThe path is written \`${path}\` so that this operation's variables are named after its own fields ` +
        `(OpenAPI allows one set of names per path): it is the URL \`${plain}\`, and either form may be sent.`;
    }
    const verb = b.verb.toLowerCase();
    if (!httpVerbs.has(verb)) throw new Error(`${operationId}: HTTP method ${b.verb} has no OpenAPI operation`);
    const item = (paths[path] ??= {});
    // Two templates of one shape under one verb: the gateway would only ever route the first.
    if (item[verb]) throw new Error(`${operationId}: ${b.verb} ${b.template} is the same route as ${item[verb].operationId}`);
    item[verb] = operation;
  }
  return {
    openapi: "3.1.0",
    info: {
      title: opts.title ?? "Platform API v2",
      version: opts.version ?? "v2",
      description:
        "The REST form of the Platform API v2: every method here is also served over gRPC, gRPC-web and Connect on the same port. " +
        "Bodies and responses are proto3 JSON (64-bit integers as strings, timestamps as RFC 3339 strings, enums by name). " +
        "Errors are google.rpc.Status bodies (AIP-193). Authenticate with `Authorization: Bearer <token>`. " +
        `Lists answer a page at a time: ${PAGE_SIZE_RULE}`,
    },
    servers: [{ url: "/", description: "this server" }],
    security: [{ [BEARER]: [] }],
    tags: [...new Set(tagOf.values())].map((name) => ({ name, description: serviceOf(tagOf, name) })),
    paths,
    components: {
      schemas: schemas.components,
      responses: {
        [ERROR_RESPONSE]: {
          description:
            "An error: a google.rpc.Status with its gRPC code, a message, and typed details (always an ErrorInfo with a reason and a domain). " +
            "HTTP status by code: INVALID_ARGUMENT, FAILED_PRECONDITION, OUT_OF_RANGE 400; UNAUTHENTICATED 401 (with WWW-Authenticate: Bearer); " +
            "PERMISSION_DENIED 403; NOT_FOUND 404; ALREADY_EXISTS, ABORTED 409; RESOURCE_EXHAUSTED 429; UNIMPLEMENTED 501; UNAVAILABLE 503; DEADLINE_EXCEEDED 504.",
          content: { "application/json": { schema: schemas.statusRef() } },
        },
      },
      securitySchemes: {
        [BEARER]: {
          type: "http",
          scheme: "bearer",
          bearerFormat: "JWT",
          description:
            "Paste the token alone, without `Bearer ` (it is added for you): in development, the token `npm start` printed " +
            "(the value of its `export TOKEN=...` line). Otherwise a token of this server (from the token exchange, POST /sts/exchange) " +
            "or an ID token of an identity provider an identity matches.",
        },
      },
    },
  };
}

/** How many distinct items share each key. */
function countBy<T>(items: T[], key: (item: T) => string): Map<string, number> {
  const out = new Map<string, number>();
  for (const item of new Set(items)) out.set(key(item), (out.get(key(item)) ?? 0) + 1);
  return out;
}

/**
 * The method's name ("ListGroups"), prefixed with its service's name when two services share it, and
 * suffixed with the HTTP method for a second binding of one method ("ExchangeGet"). Letters only: Swagger UI
 * reads "_" in a deep link as an escaped space and escapes "." in element ids, and code generators make
 * function names of these.
 */
function operationIdOf(b: RestBindingDescription, methodNames: Map<string, number>, taken: Set<string>): string {
  const base = methodNames.get(b.method.name) === 1 ? b.method.name : `${b.method.parent.name}${b.method.name}`;
  const verb = b.verb.charAt(0) + b.verb.slice(1).toLowerCase();
  let id = taken.has(base) ? base + verb : base;
  for (let n = 2; taken.has(id); n++) id = `${base}${verb}${n}`;
  taken.add(id);
  return id;
}

const httpVerbs = new Set(["get", "put", "post", "delete", "patch", "head", "options", "trace"]);

/** Tags by service: the service's name, or its full name when two served services share a name. */
function serviceTags(services: DescService[]): Map<DescService, string> {
  const unique = [...new Set(services)];
  const count = new Map<string, number>();
  for (const s of unique) count.set(s.name, (count.get(s.name) ?? 0) + 1);
  return new Map(unique.map((s) => [s, count.get(s.name) === 1 ? s.name : s.typeName]));
}

function serviceOf(tags: Map<DescService, string>, tag: string): string {
  const service = [...tags].find(([, t]) => t === tag)![0];
  return `\`${service.typeName}\``;
}

/**
 * OpenAPI paths of the templates, each operation's parameters named after its own request fields. OpenAPI
 * deems two paths that differ only in their parameter names identical (`/groups/{uid}`, `/groups/{parent}`)
 * and forbids them, while the contract binds one shape to several fields (GET by uid, POST under parent,
 * PATCH by group.uid). So the first set of names a shape meets gets the plain path, and each other set the
 * same path with one more character of its literal text percent-encoded (`/%69am/v2/groups/{parent}`): a
 * distinct path to OpenAPI, the same URL to HTTP (RFC 3986, 6.2.2.2: an encoded unreserved character is the
 * character), and to the gateway, which matches literal segments decoded. Clients send the path as written.
 */
class PathNames {
  /** Per shape, the name sets met so far, in order: the index is how many characters the path encodes. */
  private readonly byShape = new Map<string, string[]>();

  of(b: RestBindingDescription): { path: string; names: string[]; plain: string } {
    const template = parseTemplate(b.template);
    const segments: string[] = [];
    const names: string[] = [];
    let wildcards = 0;
    for (let i = 0; i < template.parts.length; ) {
      const variable = template.variables.find((v) => v.start === i);
      if (variable) {
        names.push(variable.fieldPath.join("."));
        segments.push("\0");
        i = variable.end;
        continue;
      }
      const part = template.parts[i]!;
      if (part.kind === "literal") {
        segments.push(part.value);
      } else {
        // A bare wildcard binds no field; it is still a parameter of the path.
        names.push(`wildcard${++wildcards}`);
        segments.push("\0");
      }
      i++;
    }
    const verb = template.verb === undefined ? "" : `:${template.verb}`;
    const shape = "/" + segments.join("/") + verb;
    const met = this.byShape.get(shape) ?? [];
    this.byShape.set(shape, met);
    const key = names.join("\n");
    let variant = met.indexOf(key);
    if (variant < 0) variant = met.push(key) - 1;
    const render = (literals: string[]) => {
      let k = 0;
      return "/" + literals.map((s) => (s === "\0" ? `{${names[k++]}}` : s)).join("/") + verb;
    };
    return { path: render(encodeFirst(segments, variant, b.template)), names, plain: render(segments) };
  }
}

/** The literal segments with their first `count` characters (across segments, in order) percent-encoded. */
function encodeFirst(segments: readonly string[], count: number, template: string): string[] {
  let left = count;
  const out = segments.map((s) => {
    if (s === "\0" || left === 0) return s;
    const take = Math.min(left, s.length);
    left -= take;
    return [...s.slice(0, take)].map((ch) => `%${ch.charCodeAt(0).toString(16).toUpperCase().padStart(2, "0")}`).join("") + s.slice(take);
  });
  if (left > 0) throw new Error(`${template}: too many sets of variable names for one path shape`);
  return out;
}

function describeOperation(b: RestBindingDescription, operationId: string, tag: string, names: string[], schemas: SchemaBuilder): Operation {
  const method = b.method;
  const template = parseTemplate(b.template);
  const parameters: Parameter[] = [];
  let wildcard = 0;
  let k = 0;
  for (let i = 0; i < template.parts.length; ) {
    const variable = template.variables.find((v) => v.start === i);
    if (variable) {
      const key = variable.fieldPath.join(".");
      const fields = b.variables.find((v) => v.key === key)!.fields;
      parameters.push(pathParameter(names[k++]!, key, fields, variable.multi, b.template, schemas));
      i = variable.end;
      continue;
    }
    const part = template.parts[i]!;
    if (part.kind !== "literal") {
      wildcard++;
      parameters.push({
        name: names[k++]!,
        in: "path",
        required: true,
        description: `Wildcard ${wildcard} of \`${b.template}\`: matches ${part.kind === "deep" ? "one or more segments" : "one segment"}; sets no field.`,
        schema: { type: "string" },
      });
    }
    i++;
  }
  for (const q of queryParameters(method.input, b.bound)) parameters.push(queryParameter(q.fields, schemas));

  const auth = authRuleOf(method);
  const operation: Operation = {
    operationId,
    summary: method.name,
    description: operationDescription(method, auth),
    tags: [tag],
    ...(parameters.length > 0 ? { parameters } : {}),
    responses: {
      "200": { description: `${method.output.name}`, content: { "application/json": { schema: schemas.ref(method.output) } } },
      default: { $ref: `#/components/responses/${ERROR_RESPONSE}` },
    },
  };
  const body = requestBody(b, schemas);
  if (body) operation.requestBody = body;
  // A method whose handler verifies the bearer itself (the token exchange) keeps the document's bearer scheme.
  if (auth?.mode.case === "disabled" && !auth.mode.value.handlerVerifiesBearer) operation.security = [];
  if (method.deprecated) operation.deprecated = true;
  return operation;
}

function operationDescription(method: DescMethod, auth: AuthRule | undefined): string {
  const lines = [`RPC \`${method.parent.typeName}/${method.name}\`, also served over gRPC, gRPC-web and Connect.`];
  if (auth?.mode.case === "disabled" && auth.mode.value.handlerVerifiesBearer) {
    lines.push("Takes a bearer token that the method verifies itself, not one of this server's access tokens (which the others need).");
  } else if (auth?.mode.case === "disabled") {
    lines.push("No authentication: no bearer token is needed.");
  } else if (auth?.mode.case === "enabled") {
    const rule = auth.mode.value;
    const caps = rule.capabilities.map((c) => `\`${Capability[c] ?? c}\``);
    if (caps.length === 0) {
      lines.push(rule.identityOptional ? "Needs a bearer token, which need not yet belong to an identity." : "Needs a bearer token.");
    } else if (rule.unscoped && method.name.startsWith("List")) {
      lines.push(`Needs a bearer token; lists only what lies in groups where the caller holds ${caps.join(", ")}.`);
    } else if (rule.unscoped) {
      lines.push(`Needs a bearer token whose identity holds ${caps.join(", ")} on the group the call acts on.`);
    } else {
      const scope = scopePathOf(method.input)?.map((f) => f.name).join(".");
      lines.push(`Needs a bearer token whose identity holds ${caps.join(", ")} on the group named by \`${scope ?? "the request"}\` (or one above it).`);
    }
  }
  return lines.join("\n\n");
}

function pathParameter(name: string, key: string, fields: DescField[], multi: boolean, template: string, schemas: SchemaBuilder): Parameter {
  const leaf = fields[fields.length - 1]!;
  const parts = [`Sets \`${key}\`.`];
  if (multi) {
    parts.push(
      `May contain \`/\`: the template variable of \`${template}\` spans several path segments (a uid such as \`<group>/<child>\`). ` +
        "Send the slashes as they are or encoded as `%2F` (as generated clients do): both mean `/`.",
    );
  }
  return { name, in: "path", required: true, description: parts.join(" "), schema: schemas.fieldValue(leaf) };
}

/** How every List pages (the list kernel's rule), said on the document and on each `pageSize` parameter. */
const PAGE_SIZE_RULE =
  `\`pageSize\` rows (${DEFAULT_PAGE_SIZE} when it is 0 or absent, at most ${MAX_PAGE_SIZE}: a larger value gets ${MAX_PAGE_SIZE}; a negative one is INVALID_ARGUMENT), ` +
  "and a `nextPageToken` to pass as `pageToken` for the next page (empty on the last).";

function queryParameter(fields: DescField[], schemas: SchemaBuilder): Parameter {
  const leaf = fields[fields.length - 1]!;
  const jsonName = fields.map((f) => f.jsonName).join(".");
  const protoName = fields.map((f) => f.name).join(".");
  const notes: string[] = [];
  if (protoName === "page_size") notes.push(`Rows per page: ${PAGE_SIZE_RULE}`);
  if (protoName !== jsonName) notes.push(`Also accepted as \`${protoName}\`.`);
  if (leaf.fieldKind === "list" && !jsonMessageOf(leaf)) notes.push(`Repeated: give the parameter once per value (\`${jsonName}=a&${jsonName}=b\`).`);
  if (leaf.oneof) {
    const members = leaf.oneof.fields.map((f) => `\`${[...fields.slice(0, -1).map((p) => p.jsonName), f.jsonName].join(".")}\``);
    notes.push(`At most one of ${members.join(", ")}.`);
  }
  if (leaf.fieldKind === "message" && leaf.message.typeName === "google.protobuf.FieldMask") notes.push("Comma-separated field paths.");
  const message = jsonMessageOf(leaf);
  if (message) notes.push(...jsonNotes(jsonName, message));
  if (isRequired(leaf)) notes.push("Required by the method.");
  const schema = leaf.fieldKind === "list" ? { type: "array", items: schemas.elementValue(leaf) } : schemas.fieldValue(leaf);
  const p: Parameter = { name: jsonName, in: "query", required: false, schema };
  // OpenAPI has no serialization for an array of objects in a query: the description says it, the example shows it.
  if (message) p.example = [exampleOf(message)];
  if (notes.length > 0) p.description = notes.join(" ");
  if (leaf.fieldKind === "list") Object.assign(p, { style: "form", explode: true });
  if (fields.some((f) => f.deprecated)) p.deprecated = true;
  return p;
}

/** How a repeated message parameter is written: one JSON object per element (docs/api.md, "Messages in query parameters"). */
function jsonNotes(jsonName: string, message: DescMessage): string[] {
  const example = `${jsonName}=${JSON.stringify(exampleOf(message))}`;
  return [
    `Repeated message: give the parameter once per element, each value the element's proto3 JSON object, URL-encoded (\`${example}&${jsonName}={...}\`).`,
    "Keys naming no field are ignored.",
  ];
}

/** A small JSON object of the message's type, for the examples: its first two fields with placeholder values. */
function exampleOf(message: DescMessage): Record<string, unknown> {
  return Object.fromEntries(message.fields.slice(0, 2).map((f) => [f.jsonName, exampleValue(f)]));
}

function exampleValue(field: DescField): unknown {
  switch (field.fieldKind) {
    case "scalar":
      return scalarExample(field.scalar);
    case "enum":
      return enumExample(field.enum);
    case "list":
      return [field.listKind === "scalar" ? scalarExample(field.scalar) : field.listKind === "enum" ? enumExample(field.enum) : {}];
    default:
      return {};
  }
}

function scalarExample(type: ScalarType): unknown {
  const schema = scalarSchema(type);
  if (schema.type === "boolean") return true;
  if (schema.type === "integer" || schema.type === "number") return 1;
  if (schema.format === "int64" || schema.format === "uint64") return "1";
  return schema.format === "byte" ? "AQID" : "...";
}

/** The first value after the zero (UNSPECIFIED) one. */
function enumExample(desc: DescEnum): string {
  return (desc.values[1] ?? desc.values[0])!.name;
}

function requestBody(b: RestBindingDescription, schemas: SchemaBuilder): Operation["requestBody"] {
  if (b.body === undefined) return undefined;
  if (b.body === "*") {
    // The whole request, less the fields the URL path sets.
    const omit = new Set(b.variables.filter((v) => v.fields.length === 1).map((v) => v.fields[0]!.name));
    const schema = omit.size === 0 ? schemas.ref(b.method.input) : schemas.messageSchema(b.method.input, omit);
    const required = b.method.input.fields.some((f) => !omit.has(f.name) && isRequired(f));
    return { required, content: { "application/json": { schema } } };
  }
  const field = b.body;
  return { required: isRequired(field), content: { "application/json": { schema: schemas.fieldValue(field) } } };
}

const int64Types = new Set([ScalarType.INT64, ScalarType.SINT64, ScalarType.SFIXED64]);
const uint64Types = new Set([ScalarType.UINT64, ScalarType.FIXED64]);

/** The proto3 JSON form of a scalar. */
function scalarSchema(type: ScalarType): Schema {
  if (int64Types.has(type)) return { type: "string", format: "int64", pattern: "^-?[0-9]+$" };
  if (uint64Types.has(type)) return { type: "string", format: "uint64", pattern: "^[0-9]+$" };
  switch (type) {
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return { type: "integer", format: "int32" };
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return { type: "integer", format: "uint32", minimum: 0, maximum: 4294967295 };
    case ScalarType.FLOAT:
      return { type: "number", format: "float" };
    case ScalarType.DOUBLE:
      return { type: "number", format: "double" };
    case ScalarType.BOOL:
      return { type: "boolean" };
    case ScalarType.BYTES:
      return { type: "string", format: "byte", contentEncoding: "base64" };
    default:
      return { type: "string" };
  }
}

const wrapperTypes: Record<string, ScalarType> = {
  "google.protobuf.DoubleValue": ScalarType.DOUBLE,
  "google.protobuf.FloatValue": ScalarType.FLOAT,
  "google.protobuf.Int64Value": ScalarType.INT64,
  "google.protobuf.UInt64Value": ScalarType.UINT64,
  "google.protobuf.Int32Value": ScalarType.INT32,
  "google.protobuf.UInt32Value": ScalarType.UINT32,
  "google.protobuf.BoolValue": ScalarType.BOOL,
  "google.protobuf.StringValue": ScalarType.STRING,
  "google.protobuf.BytesValue": ScalarType.BYTES,
};

/** The special JSON forms of the well-known types (inline: they are values, not objects with fields). */
function wellKnownSchema(typeName: string): Schema | undefined {
  switch (typeName) {
    case "google.protobuf.Timestamp":
      return { type: "string", format: "date-time", description: "RFC 3339, for example `2024-01-02T03:04:05Z`." };
    case "google.protobuf.Duration":
      return { type: "string", pattern: "^-?[0-9]+(\\.[0-9]{1,9})?s$", description: "Seconds with an `s` suffix, for example `1.5s`." };
    case "google.protobuf.FieldMask":
      return { type: "string", description: "Comma-separated field paths, for example `name,description`." };
    case "google.protobuf.Struct":
      return { type: "object", additionalProperties: true };
    case "google.protobuf.Value":
      return { description: "Any JSON value." };
    case "google.protobuf.ListValue":
      return { type: "array", items: {} };
    case "google.protobuf.Empty":
      return { type: "object", properties: {} };
    case "google.protobuf.Any":
      return {
        type: "object",
        required: ["@type"],
        properties: { "@type": { type: "string", description: "The type URL, for example `type.googleapis.com/google.rpc.ErrorInfo`." } },
        additionalProperties: true,
      };
  }
  const wrapped = wrapperTypes[typeName];
  if (wrapped !== undefined) {
    const inner = scalarSchema(wrapped);
    return { ...inner, type: [inner.type as string, "null"] };
  }
  return undefined;
}

/**
 * Component schemas of messages and enums, keyed by full proto name, built as they are referenced (so
 * recursive messages are one $ref to themselves).
 */
class SchemaBuilder {
  readonly components: Record<string, Schema> = {};

  ref(desc: DescMessage): Schema {
    const wk = wellKnownSchema(desc.typeName);
    if (wk) return wk;
    if (!(desc.typeName in this.components)) {
      this.components[desc.typeName] = {}; // placeholder: a recursive reference finds it
      this.components[desc.typeName] = this.messageSchema(desc, new Set());
    }
    return { $ref: `#/components/schemas/${desc.typeName}` };
  }

  enumRef(desc: DescEnum): Schema {
    if (desc.typeName === "google.protobuf.NullValue") return { type: "null" };
    if (!(desc.typeName in this.components)) {
      this.components[desc.typeName] = { type: "string", enum: desc.values.map((v) => v.name), description: `\`${desc.typeName}\`, by value name.` };
    }
    return { $ref: `#/components/schemas/${desc.typeName}` };
  }

  /** The object schema of a message, without the omitted fields (by proto name). */
  messageSchema(desc: DescMessage, omit: ReadonlySet<string>): Schema {
    const properties: Record<string, Schema> = {};
    const required: string[] = [];
    for (const field of desc.fields) {
      if (omit.has(field.name)) continue;
      properties[field.jsonName] = this.property(desc, field);
      if (isRequired(field)) required.push(field.jsonName);
    }
    const schema: Schema = { type: "object", properties };
    if (required.length > 0) schema.required = required;
    schema.description = `\`${desc.typeName}\``;
    return schema;
  }

  /** A field as a property: its value schema with its behaviours. */
  private property(desc: DescMessage, field: DescField): Schema {
    const value = this.fieldSchema(desc, field);
    const notes: string[] = [];
    if (field.oneof) {
      const others = field.oneof.fields.filter((f) => f !== field).map((f) => `\`${f.jsonName}\``);
      notes.push(`Member of the oneof \`${field.oneof.name}\`: at most one of \`${field.jsonName}\`, ${others.join(", ")} is set.`);
    }
    if (isImmutable(field)) notes.push("Immutable: set when the resource is created, never changed after.");
    if (isOutputOnly(field)) notes.push("Output only: set by the server, ignored in requests.");
    const out: Schema = "$ref" in value ? { $ref: value.$ref } : { ...value };
    const description = [typeof value.description === "string" ? value.description : undefined, ...notes].filter(Boolean).join(" ");
    if (description !== "") out.description = description;
    if (isOutputOnly(field)) out.readOnly = true;
    if (field.deprecated) out.deprecated = true;
    return out;
  }

  /** The schema of a field's value: a list or a map as a whole. */
  private fieldSchema(desc: DescMessage, field: DescField): Schema {
    if (field.fieldKind === "list") return { type: "array", items: this.elementValue(field, desc) };
    if (field.fieldKind === "map") {
      const value = field.mapKind === "message" ? this.ref(field.message) : field.mapKind === "enum" ? this.enumRef(field.enum) : scalarSchema(field.scalar);
      return { type: "object", additionalProperties: value, description: `A map: a JSON object whose keys are ${ScalarType[field.mapKey].toLowerCase()} values.` };
    }
    return this.fieldValue(field);
  }

  /** The schema of a singular field's value (or of a whole list, for a repeated one). */
  fieldValue(field: DescField): Schema {
    switch (field.fieldKind) {
      case "scalar":
        return scalarSchema(field.scalar);
      case "enum":
        return this.enumRef(field.enum);
      case "message":
        return this.ref(field.message);
      case "list":
        return { type: "array", items: this.elementValue(field) };
      case "map":
        return this.fieldSchema(field.parent, field);
    }
  }

  /** The schema of one element of a repeated field; details of a google.rpc.Status are its error types. */
  elementValue(field: DescField & { fieldKind: "list" }, parent?: DescMessage): Schema {
    if (field.listKind === "scalar") return scalarSchema(field.scalar);
    if (field.listKind === "enum") return this.enumRef(field.enum);
    if (parent?.typeName === StatusSchema.typeName && field.name === "details") return this.errorDetail();
    return this.ref(field.message);
  }

  statusRef(): Schema {
    return this.ref(StatusSchema);
  }

  /** One of the google.rpc error details, packed as an Any: its fields and its "@type". */
  private errorDetail(): Schema {
    const variants = file_google_rpc_error_details.messages.map((m) => ({
      allOf: [
        this.ref(m),
        { type: "object", required: ["@type"], properties: { "@type": { const: ANY_TYPE_PREFIX + m.typeName } } },
      ],
    }));
    return {
      type: "object",
      required: ["@type"],
      properties: { "@type": { type: "string" } },
      oneOf: variants,
      description: "A google.rpc error detail packed as an Any: its `@type` names the type, its other keys are the detail's fields.",
    };
  }
}
