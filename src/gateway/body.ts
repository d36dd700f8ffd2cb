// The request body of a REST call (read by kernel/http-body.ts): JSON merged into the whole request
// (`body: "*"`) or into one field (`body: "repo"`), naming the field a bad value belongs to, deriving an update mask from the keys
// a PATCH body carries; and the form-encoded body a binding without a body reads as parameters.
import { mergeFromJson, type DescField, type DescMessage, type JsonObject, type JsonValue, type Message, type Registry } from "@bufbuild/protobuf";
import { invalidArgument } from "../kernel/errors/index.js";
import { bodyText } from "../kernel/http-body.js";
import { fieldByName, isPlainObject, isWellKnown, joinPath, locateJsonError, withoutUnknownFields } from "./fields.js";

/** Largest request body the gateway reads: 4 MiB. */
export const defaultMaxBodyBytes = 4 * 1024 * 1024;

/** True when a Content-Type names a form-encoded body (application/x-www-form-urlencoded, any parameters). */
export function isFormEncoded(contentType: string | undefined): boolean {
  return contentType?.split(";")[0]!.trim().toLowerCase() === "application/x-www-form-urlencoded";
}

/**
 * A form-encoded body's fields, in order, as a query string's (`aud=a&aud=b&identity=x`). Not UTF-8 ->
 * INVALID_ARGUMENT on "body".
 */
export function parseFormBody(bytes: Uint8Array): URLSearchParams {
  return new URLSearchParams(bodyText(bytes));
}

/**
 * A form-encoded body that is not JSON, sent to a binding whose body is JSON (`body: "*"` or one field):
 * refused, as grpc-gateway's JSON decoder refuses it; only bindings without a body read forms.
 */
export function formBodyRefused(): Error {
  return invalidArgument({
    field: "body",
    description: "is form-encoded (application/x-www-form-urlencoded), but this method's body is proto3 JSON: send the request as JSON",
  });
}

/**
 * Merges the body into message: the whole request when bodyField is "*", else the one field. Keys naming no
 * field are ignored. A value that does not parse -> INVALID_ARGUMENT naming its proto field path from the
 * request root (for example "repo.catalog_tier").
 */
export function applyBody(schema: DescMessage, message: Message, bodyField: DescField | "*", json: JsonValue, registry: Registry): void {
  const known = withoutUnknownFields(schema, bodyField === "*" ? json : { [bodyField.jsonName]: json });
  try {
    mergeFromJson(schema, message, known, { registry });
  } catch {
    throw invalidArgument(locateJsonError(schema, known, "", { registry }));
  }
}

/**
 * The update mask a PATCH body implies: the proto paths of the keys present, descending into nested messages;
 * maps, well-known types (Struct, Timestamp...), lists, empty objects and nulls are leaves. Paths listed in
 * exclude (fields the URL path binds, such as "uid") are left out.
 */
export function deriveUpdateMask(resource: DescMessage, json: JsonObject, exclude: readonly string[] = []): string[] {
  const out: string[] = [];
  collectPaths(resource, json, "", out);
  return exclude.length === 0 ? out : out.filter((p) => !exclude.includes(p));
}

function collectPaths(desc: DescMessage, json: JsonObject, prefix: string, out: string[]): void {
  for (const [key, value] of Object.entries(json)) {
    const field = fieldByName(desc, key);
    if (!field) continue;
    const path = joinPath(prefix, field.name);
    const nested = field.fieldKind === "message" && !isWellKnown(field.message) && isPlainObject(value) && Object.keys(value).length > 0;
    if (nested) collectPaths(field.message, value, path, out);
    else out.push(path);
  }
}
