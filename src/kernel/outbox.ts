// The event a successful mutation records in the outbox, built from its method's `event` option
// (apiserver.options.v1.EventRule), its request, its response and its caller. Pure: the unit of work
// (unit-of-work.ts) writes the row in the mutation's transaction.
//
//   type      the rule's CloudEvent type
//   subject   the uid of the resource the event is about: the response's `uid` when it has one (creates,
//             updates), else the request's scope field (deletes: `uid`; a batch: its `parent`), else the
//             request field the rule's subject_field names (an unscoped method's group), else the caller
//   group     the group the event happened in: the subject without its last `subject_depth` uid segments
//             (empty when the subject lies outside every group, as a root-level identity does)
//   body      the response as proto3 JSON, or the request when the response has no fields (a delete), with every
//             field marked `debug_redact` cleared at any depth (secrets never leave in an event)
import { clone, toJson, type DescField, type DescMessage, type DescMethod, type Message, type MessageShape, type Registry } from "@bufbuild/protobuf";
import { reflect, type ReflectMessage } from "@bufbuild/protobuf/reflect";
import { EmptySchema } from "@bufbuild/protobuf/wkt";
import type { Audience } from "../../gen/apiserver/options/v1/options_pb.js";
import { eventRuleOf, scopePathOf } from "./descriptors.js";

/** What the outbox needs of a method, read once from its descriptor. */
export interface EventPlan {
  method: DescMethod;
  type: string;
  audience: Audience;
  subjectDepth: number;
  /** The request's scope field path (iam_scope), when it has one. */
  scopePath: readonly DescField[] | undefined;
  /** The request field the rule's subject_field names, when it names one. */
  subjectField: readonly DescField[] | undefined;
  /** The response's `uid` field, when it has one. */
  responseUid: DescField | undefined;
  /** Whether the body is the request (the response is empty: a delete) rather than the response. */
  bodyIsRequest: boolean;
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
  body: Record<string, unknown>;
}

/** The method's event plan, or undefined when it declares no event. */
export function eventPlanOf(method: DescMethod): EventPlan | undefined {
  const rule = eventRuleOf(method);
  if (!rule) return undefined;
  const subjectField = rule.subjectField === "" ? undefined : method.input.fields.find((f) => f.name === rule.subjectField && f.fieldKind === "scalar");
  if (rule.subjectField !== "" && !subjectField) throw new Error(`${method.parent.typeName}.${method.name}: event subject_field ${rule.subjectField} is not a scalar field of ${method.input.typeName}`);
  return {
    method,
    type: rule.type,
    audience: rule.audience,
    subjectDepth: rule.subjectDepth,
    scopePath: scopePathOf(method.input),
    subjectField: subjectField ? [subjectField] : undefined,
    responseUid: method.output.fields.find((f) => f.name === "uid" && f.fieldKind === "scalar"),
    // google.protobuf.Empty (a delete), or a response with nothing in it (RequestGroupAccess).
    bodyIsRequest: method.output.typeName === EmptySchema.typeName || method.output.fields.length === 0,
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
    (plan.scopePath && stringField(call.request, plan.scopePath)) ||
    (plan.subjectField && stringField(call.request, plan.subjectField)) ||
    call.actor;
  const [desc, message] = plan.bodyIsRequest ? [plan.method.input, call.request] : [plan.method.output, call.response];
  return {
    type: plan.type,
    subject,
    groupUid: groupOfSubject(subject, plan.subjectDepth),
    audience: plan.audience,
    method: plan.path,
    actor: call.actor,
    body: toJson(desc, redacted(desc, message), { registry }) as Record<string, unknown>,
  };
}

const redactionOf = new Map<DescMessage, boolean>();

/** Whether a message of this type can hold a `debug_redact` field, at any depth. */
function holdsRedacted(desc: DescMessage, visiting = new Set<DescMessage>()): boolean {
  const known = redactionOf.get(desc);
  if (known !== undefined) return known;
  if (visiting.has(desc)) return false;
  visiting.add(desc);
  const found = desc.fields.some((f) => {
    if (f.proto.options?.debugRedact) return true;
    const inner =
      f.fieldKind === "message" || (f.fieldKind === "list" && f.listKind === "message") || (f.fieldKind === "map" && f.mapKind === "message")
        ? f.message
        : undefined;
    return inner !== undefined && holdsRedacted(inner, visiting);
  });
  visiting.delete(desc);
  if (visiting.size === 0) redactionOf.set(desc, found);
  return found;
}

/** The message with every `debug_redact` field cleared, at any depth (a copy; the message itself is kept). */
export function redacted<D extends DescMessage>(desc: D, message: MessageShape<D>): MessageShape<D> {
  if (!holdsRedacted(desc)) return message;
  const copy = clone(desc, message);
  clearRedacted(reflect(desc, copy));
  return copy;
}

function clearRedacted(r: ReflectMessage): void {
  for (const f of r.fields) {
    if (f.proto.options?.debugRedact) {
      r.clear(f);
      continue;
    }
    if (!r.isSet(f)) continue;
    if (f.fieldKind === "message") clearRedacted(r.get(f));
    else if (f.fieldKind === "list" && f.listKind === "message") for (const item of r.get(f)) clearRedacted(item as ReflectMessage);
    else if (f.fieldKind === "map" && f.mapKind === "message") for (const [, v] of r.get(f)) clearRedacted(v as ReflectMessage);
  }
}
