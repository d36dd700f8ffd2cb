// The event a successful mutation records in the outbox, built from its method's `event` option
// (apiserver.options.v1.EventRule), its request, its response and its caller. Pure: the unit of work
// (unit-of-work.ts) writes the row in the mutation's transaction.
//
//   type        the rule's CloudEvent type
//   subject     the uid of the resource the event is about: the response's `uid` when it has one (creates,
//               updates), else the field the rule's subject_field names (of the response, else of the request:
//               the organization terms were accepted for, the group an unscoped method names), else the
//               request's scope field (deletes: `uid`; a batch: its `parent`), else the caller
//   group       the group the event happened in, which subscriptions are matched on: the subject without its
//               last `subject_depth` uid segments (empty when the subject lies outside every group, as a
//               root-level identity does)
//   extensions  the CloudEvent extensions the rule names, as the published SDK sets them for the type:
//               `group` (the rule's group_extension: the event's group, the organization, or the subject's
//               parent) and `identityprovider` (the uid one segment below the event's group on the subject's
//               path: a mapping's provider); an empty value is left out
//   bodyType    the body's full proto message name (the `bodytype` extension receivers decode the body by)
//   body        the response as proto3 JSON, or the request when the response has no fields (a delete), as the
//               published SDK's redaction for that type leaves it: only the fields the message's event_body
//               option keeps (all when it names none), no body at all when it says none; and, at any depth,
//               without fields marked `debug_redact` (secrets) or `server_added` (fields the published
//               messages lack, so the body decodes strictly into them)
import { clone, toJson, type DescField, type DescMessage, type DescMethod, type Message, type MessageShape, type Registry } from "@bufbuild/protobuf";
import { reflect, type ReflectMessage } from "@bufbuild/protobuf/reflect";
import { EmptySchema } from "@bufbuild/protobuf/wkt";
import { GroupExtension, type Audience } from "../../gen/apiserver/options/v1/options_pb.js";
import { eventBodyOf, eventRuleOf, isServerAdded, scopePathOf } from "./descriptors.js";

/** What the outbox needs of a method, read once from its descriptor. */
export interface EventPlan {
  method: DescMethod;
  type: string;
  audience: Audience;
  subjectDepth: number;
  /** The request's scope field path (iam_scope), when it has one. */
  scopePath: readonly DescField[] | undefined;
  /** The field the rule's subject_field names (of the response or of the request), when it names one. */
  subjectField: { in: "response" | "request"; path: readonly DescField[] } | undefined;
  /** The response's `uid` field, when it has one. */
  responseUid: DescField | undefined;
  /** Whether the body is the request (the response is empty: a delete) rather than the response. */
  bodyIsRequest: boolean;
  /** The body's message (the request's or the response's). */
  bodyType: DescMessage;
  /** The CloudEvent extensions the rule names, each with how its value follows from the event. */
  extensions: readonly { name: string; valueOf: (event: { subject: string; groupUid: string }) => string }[];
  /** "/<package>.<Service>/<Method>". */
  path: string;
}

/** An outbox row, before the database gives it its id and time. */
export interface OutboxEvent {
  type: string;
  subject: string;
  groupUid: string;
  audience: number;
  method: string;
  actor: string;
  /** The body as proto3 JSON; null when the event carries none. */
  body: Record<string, unknown> | null;
  /** The body's full proto message name. */
  bodyType: string;
  /** CloudEvent extension attributes by name (their values non-empty). */
  extensions: Record<string, string>;
}

const rootOf = (uid: string) => uid.split("/")[0] ?? "";

/** How the value of each extension a rule may name follows from the event. */
function extensionOf(method: DescMethod, name: string, rule: { groupExtension: GroupExtension; subjectDepth: number }): (e: { subject: string; groupUid: string }) => string {
  switch (name) {
    case "group":
      switch (rule.groupExtension) {
        case GroupExtension.UNSPECIFIED:
          return (e) => e.groupUid;
        case GroupExtension.ORGANIZATION:
          return (e) => rootOf(e.subject);
        case GroupExtension.SUBJECT_PARENT:
          return (e) => groupOfSubject(e.subject, 1);
      }
      break;
    case "identityprovider":
      // The provider lies one segment below the event's group: <group>/<provider>[/<mapping>].
      if (rule.subjectDepth < 1) break;
      return (e) => groupOfSubject(e.subject, rule.subjectDepth - 1);
  }
  throw new Error(`${method.parent.typeName}.${method.name}: no way to set the event extension ${name} (group_extension ${rule.groupExtension}, subject_depth ${rule.subjectDepth})`);
}

/** The method's event plan, or undefined when it declares no event. */
export function eventPlanOf(method: DescMethod): EventPlan | undefined {
  const rule = eventRuleOf(method);
  if (!rule) return undefined;
  const named = (m: DescMessage) => m.fields.find((f) => f.name === rule.subjectField && f.fieldKind === "scalar");
  const [inResponse, inRequest] = rule.subjectField === "" ? [undefined, undefined] : [named(method.output), named(method.input)];
  if (rule.subjectField !== "" && !inResponse && !inRequest) {
    throw new Error(`${method.parent.typeName}.${method.name}: event subject_field ${rule.subjectField} is not a scalar field of ${method.output.typeName} or ${method.input.typeName}`);
  }
  const bodyIsRequest = method.output.typeName === EmptySchema.typeName || method.output.fields.length === 0;
  const bodyType = bodyIsRequest ? method.input : method.output;
  const keep = eventBodyOf(bodyType)?.keep ?? [];
  const unknown = keep.filter((name) => !bodyType.fields.some((f) => f.name === name));
  if (unknown.length > 0) throw new Error(`${bodyType.typeName}: event_body keeps ${unknown.join(", ")}, not fields of the message`);
  return {
    method,
    type: rule.type,
    audience: rule.audience,
    subjectDepth: rule.subjectDepth,
    scopePath: scopePathOf(method.input),
    subjectField: inResponse ? { in: "response", path: [inResponse] } : inRequest ? { in: "request", path: [inRequest] } : undefined,
    responseUid: method.output.fields.find((f) => f.name === "uid" && f.fieldKind === "scalar"),
    // google.protobuf.Empty (a delete), or a response with nothing in it (RequestGroupAccess).
    bodyIsRequest,
    bodyType,
    extensions: rule.extensions.map((name) => ({ name, valueOf: extensionOf(method, name, rule) })),
    path: `/${method.parent.typeName}/${method.name}`,
  };
}

function stringField(message: Message, path: readonly DescField[]): string {
  let value: unknown = message;
  for (const f of path) value = (value as Record<string, unknown> | undefined)?.[f.localName];
  return typeof value === "string" ? value : "";
}

/** The uid `depth` segments above `uid`, or "" when it has no such ancestor. */
export function groupOfSubject(uid: string, depth: number): string {
  const segments = uid.split("/");
  return segments.length > depth ? segments.slice(0, segments.length - depth).join("/") : "";
}

export function outboxEventOf(
  plan: EventPlan,
  call: { request: Message; response: Message; actor: string },
  registry: Registry,
): OutboxEvent {
  const subject =
    (plan.responseUid && stringField(call.response, [plan.responseUid])) ||
    (plan.subjectField && stringField(plan.subjectField.in === "response" ? call.response : call.request, plan.subjectField.path)) ||
    (plan.scopePath && stringField(call.request, plan.scopePath)) ||
    call.actor;
  const groupUid = groupOfSubject(subject, plan.subjectDepth);
  const extensions: Record<string, string> = {};
  for (const { name, valueOf } of plan.extensions) {
    const value = valueOf({ subject, groupUid });
    if (value !== "") extensions[name] = value;
  }
  const body = eventBody(plan.bodyType, plan.bodyIsRequest ? call.request : call.response);
  return {
    type: plan.type,
    subject,
    groupUid,
    audience: plan.audience,
    method: plan.path,
    actor: call.actor,
    body: body === undefined ? null : (toJson(plan.bodyType, body, { registry }) as Record<string, unknown>),
    bodyType: plan.bodyType.typeName,
    extensions,
  };
}

/** A field no event carries: a secret (debug_redact), or one the published message lacks (server_added). */
const leftOut = (f: DescField) => f.proto.options?.debugRedact === true || isServerAdded(f);

const clearingOf = new Map<DescMessage, boolean>();

/** Whether a message of this type can hold a field events leave out, at any depth. */
function holdsLeftOut(desc: DescMessage, visiting = new Set<DescMessage>()): boolean {
  const known = clearingOf.get(desc);
  if (known !== undefined) return known;
  if (visiting.has(desc)) return false;
  visiting.add(desc);
  const found = desc.fields.some((f) => {
    if (leftOut(f)) return true;
    const inner =
      f.fieldKind === "message" || (f.fieldKind === "list" && f.listKind === "message") || (f.fieldKind === "map" && f.mapKind === "message")
        ? f.message
        : undefined;
    return inner !== undefined && holdsLeftOut(inner, visiting);
  });
  visiting.delete(desc);
  if (visiting.size === 0) clearingOf.set(desc, found);
  return found;
}

/**
 * What an event carries of a message that is its body (a copy when anything is left out; the message itself
 * is kept): the fields its event_body option keeps, without secrets and server-added fields at any depth; or
 * undefined when the option says the event has no body.
 */
export function eventBody<D extends DescMessage>(desc: D, message: MessageShape<D>): MessageShape<D> | undefined {
  const rule = eventBodyOf(desc);
  if (rule?.none) return undefined;
  const keep = rule && rule.keep.length > 0 ? new Set(rule.keep) : undefined;
  if (!keep && !holdsLeftOut(desc)) return message;
  const copy = clone(desc, message);
  const r = reflect(desc, copy);
  if (keep) for (const f of r.fields) if (!keep.has(f.name)) r.clear(f);
  clearLeftOut(r);
  return copy;
}

function clearLeftOut(r: ReflectMessage): void {
  for (const f of r.fields) {
    if (leftOut(f)) {
      r.clear(f);
      continue;
    }
    if (!r.isSet(f)) continue;
    if (f.fieldKind === "message") clearLeftOut(r.get(f));
    else if (f.fieldKind === "list" && f.listKind === "message") for (const item of r.get(f)) clearLeftOut(item as ReflectMessage);
    else if (f.fieldKind === "map" && f.mapKind === "message") for (const [, v] of r.get(f)) clearLeftOut(v as ReflectMessage);
  }
}
