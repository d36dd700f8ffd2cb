// Updating a resource through a field mask, under its row lock: the one update flow of every Update method.
//
//   lock the row (NOT_FOUND when missing) -> the current resource as a message -> applyUpdate (the PATCH
//   rules of field-mask.ts) -> nothing changed: the row as it is, nothing written, update_time kept ->
//   check the result (violations reported from the request's root: `group.name`) -> write the new fields
//
// It runs in the call's unit of work, so the lock lasts until the transaction ends and the write commits
// with the method's event.
import { create, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import type { FieldMask } from "@bufbuild/protobuf/wkt";
import { throwIfAny, under, type FieldViolation } from "./errors/index.js";
import { applyUpdate } from "./field-mask.js";

/** What the update flow needs of a store. */
interface Lockable<Row, Fields> {
  lock(uid: string): Promise<Row>;
  write(uid: string, fields: Fields): Promise<Row>;
}

interface UpdateSpec<D extends DescMessage, Row, Fields> {
  schema: D;
  /** The request field holding the resource ("group"), prefixed to violation paths; "" for the request itself. */
  field: string;
  toMessage(row: Row): MessageShape<D>;
  /** The columns to write for the updated resource. */
  toFields(next: MessageShape<D>, current: Row): Fields;
  /**
   * What is wrong with the updated resource, as violations relative to it (`name`); `changed` lists the
   * paths that changed. May also throw (an escalation check, a reference read in the same transaction).
   */
  check?(next: MessageShape<D>, changed: readonly string[], current: Row): FieldViolation[] | Promise<FieldViolation[]>;
}

/** An update spec, declared once per resource beside its list spec (the types are inferred from it). */
export function defineUpdate<D extends DescMessage, Row, Fields>(spec: UpdateSpec<D, Row, Fields>): UpdateSpec<D, Row, Fields> {
  return spec;
}

/** Applies `patch` (with `mask`) to the resource `uid` under its row lock; returns the row as it now is. */
export async function updateUnderLock<D extends DescMessage, Row, Fields>(
  store: Lockable<Row, Fields>,
  uid: string,
  patch: MessageShape<D> | undefined,
  mask: FieldMask | undefined,
  spec: UpdateSpec<D, Row, Fields>,
): Promise<Row> {
  const current = await store.lock(uid);
  const { message, changed } = applyUpdate(spec.schema, spec.toMessage(current), patch ?? create(spec.schema), mask);
  if (changed.length === 0) return current;
  throwIfAny(under(spec.field, (await spec.check?.(message, changed, current)) ?? []));
  return store.write(uid, spec.toFields(message, current));
}
