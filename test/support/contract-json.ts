// The published wire contract (copied into test/fixtures/wire-contract.json, see test/fixtures/README.md) and
// a pure comparison of it with the compiled descriptors the server uses at run time. The comparison counts
// every fact the contract states and reports each one that the descriptors do not match, so a test can
// require 100%.
import { readFileSync } from "node:fs";
import { getExtension, hasExtension, isFieldSet, type DescEnum, type DescFile, type DescMethod } from "@bufbuild/protobuf";
import { protoCamelCase } from "@bufbuild/protobuf/reflect";
import {
  FieldDescriptorProtoSchema,
  FieldDescriptorProto_Label,
  FieldDescriptorProto_Type,
  type DescriptorProto,
  type EnumDescriptorProto,
  type FieldDescriptorProto,
} from "@bufbuild/protobuf/wkt";
import { AudienceSchema, iam_scope } from "../../gen/apiserver/options/v1/options_pb.js";
import { CapabilitySchema } from "../../gen/capabilities/capabilities_pb.js";
import { field_behavior, FieldBehaviorSchema } from "../../gen/google/api/field_behavior_pb.js";
import type { HttpRule } from "../../gen/google/api/http_pb.js";
import { authRuleOf, eventRuleOf, httpRuleOf } from "../../src/kernel/descriptors.js";

// ---------------------------------------------------------------------------------------------------------
// Shape of wire-contract.json

export interface ContractField {
  name: string;
  number: number;
  /** Scalar name (string, int64, …) or the full name of a message or enum (no leading dot). */
  type: string;
  repeated?: boolean;
  /** proto3 `optional` (explicit presence through a synthetic oneof). */
  optional?: boolean;
  /** Name of the (real) oneof the field belongs to. */
  oneof?: string;
  /** Present only where the JSON name is not the default lowerCamelCase of the field name. */
  jsonName?: string;
  /** google.api.field_behavior values, e.g. REQUIRED, OUTPUT_ONLY. */
  behavior?: string[];
  iamScope?: boolean;
}

export interface ContractMessage {
  fields: ContractField[];
  mapEntry?: boolean;
  reservedNames?: string[];
}

export interface ContractEnumValue {
  name: string;
  number: number;
}

export interface ContractHttpRule {
  get?: string;
  put?: string;
  post?: string;
  delete?: string;
  patch?: string;
  custom?: { kind: string; path: string };
  body?: string;
  responseBody?: string;
  additionalBindings?: ContractHttpRule[];
}

export interface ContractAuth {
  disabled?: Record<string, never>;
  enabled?: { capabilities?: string[]; unscoped?: boolean };
}

export interface ContractEvent {
  type: string;
  extensions?: string[];
  /** Audience without the AUDIENCE_ prefix (CUSTOMER); absent means unspecified. */
  audience?: string;
}

export interface ContractMethod {
  input: string;
  output: string;
  http?: ContractHttpRule;
  auth?: ContractAuth;
  event?: ContractEvent;
}

export interface ContractFile {
  package: string;
  messages?: Record<string, ContractMessage>;
  enums?: Record<string, ContractEnumValue[]>;
  /** Service full name → method name → method. */
  services?: Record<string, Record<string, ContractMethod>>;
}

export interface WireContract {
  /** Proto file path → file. */
  files: Record<string, ContractFile>;
}

/**
 * Location of the contract: the copy in test/fixtures (the tests need nothing outside the repository).
 * Resolved from this file, not from the working directory.
 */
export const contractUrl = new URL("../fixtures/wire-contract.json", import.meta.url);

export function loadContract(url: URL = contractUrl): WireContract {
  return JSON.parse(readFileSync(url, "utf8")) as WireContract;
}

/** The contract method (with its service full name) for a descriptor method, if the contract has it. */
export function contractMethodOf(contract: WireContract, method: DescMethod): ContractMethod | undefined {
  return contract.files[method.parent.file.name + ".proto"]?.services?.[method.parent.typeName]?.[method.name];
}

// ---------------------------------------------------------------------------------------------------------
// Comparison

export interface Mismatch {
  /** Where: file > element > fact. */
  path: string;
  expected: unknown;
  actual: unknown;
}

export interface Extra {
  path: string;
  detail: string;
}

export interface ContractComparison {
  /** Facts compared. */
  total: number;
  /** Facts that matched. */
  matched: number;
  /** Facts that did not match, and extras the design does not permit. */
  mismatches: Mismatch[];
  /** Deviations the design permits (reported, not failed). */
  extras: Extra[];
}

const MISSING = "<missing>";
const ABSENT = "<absent>";

const httpVerbs = ["get", "put", "post", "delete", "patch"] as const;

/** The proto name of an enum value (AUDIENCE_CUSTOMER), not the prefix-stripped TypeScript name. */
function valueName(en: DescEnum, n: number): string {
  return en.value[n]?.name ?? `${en.typeName}(${n})`;
}

function sorted(values: readonly string[]): string[] {
  return [...values].sort();
}

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** The contract's spelling of a field type: scalar name, or a message/enum full name. */
function fieldTypeName(field: FieldDescriptorProto): string {
  if (field.type === FieldDescriptorProto_Type.MESSAGE || field.type === FieldDescriptorProto_Type.ENUM) {
    return field.typeName.replace(/^\./, "");
  }
  return (FieldDescriptorProto_Type[field.type] ?? `TYPE_${field.type}`).toLowerCase();
}

function realOneofName(message: DescriptorProto, field: FieldDescriptorProto): string | undefined {
  if (!isFieldSet(field, FieldDescriptorProtoSchema.field.oneofIndex) || field.proto3Optional) return undefined;
  return message.oneofDecl[field.oneofIndex]?.name;
}

function behaviorNames(field: FieldDescriptorProto): string[] {
  const options = field.options;
  if (!options || !hasExtension(options, field_behavior)) return [];
  return getExtension(options, field_behavior).map((b) => valueName(FieldBehaviorSchema, b));
}

function isIamScope(field: FieldDescriptorProto): boolean {
  const options = field.options;
  return options !== undefined && hasExtension(options, iam_scope) && getExtension(options, iam_scope);
}

/** Every message of a file, nested ones and map entries included, by full name. */
function messagesOf(file: DescFile): Map<string, DescriptorProto> {
  const out = new Map<string, DescriptorProto>();
  const visit = (prefix: string, message: DescriptorProto): void => {
    const name = `${prefix}.${message.name}`;
    out.set(name, message);
    message.nestedType.forEach((m) => visit(name, m));
  };
  file.proto.messageType.forEach((m) => visit(file.proto.package, m));
  return out;
}

/** Every enum of a file, nested ones included, by full name. */
function enumsOf(file: DescFile): Map<string, EnumDescriptorProto> {
  const out = new Map<string, EnumDescriptorProto>();
  file.proto.enumType.forEach((e) => out.set(`${file.proto.package}.${e.name}`, e));
  const visit = (prefix: string, message: DescriptorProto): void => {
    const name = `${prefix}.${message.name}`;
    message.enumType.forEach((e) => out.set(`${name}.${e.name}`, e));
    message.nestedType.forEach((m) => visit(name, m));
  };
  file.proto.messageType.forEach((m) => visit(file.proto.package, m));
  return out;
}

/** Facts compared for one field (number, type, label, optional, oneof, json name, behaviours, iamScope). */
const FIELD_FACTS = 8;

function httpFacts(rule: ContractHttpRule): number {
  // pattern, body, response body, number of additional bindings, then each binding
  return 4 + (rule.additionalBindings ?? []).reduce((n, b) => n + httpFacts(b), 0);
}

function methodFacts(method: ContractMethod): number {
  let n = 3; // input, output, unary
  n += method.http ? httpFacts(method.http) : 1;
  if (method.auth) n += method.auth.enabled ? 3 : 1;
  n += method.event ? 4 : 1;
  return n;
}

function messageFacts(message: ContractMessage): number {
  return 2 + message.fields.length * (1 + FIELD_FACTS); // mapEntry, reserved names, each field: present + facts
}

function contractPattern(rule: ContractHttpRule): string {
  for (const verb of httpVerbs) {
    const path = rule[verb];
    if (path !== undefined) return `${verb.toUpperCase()} ${path}`;
  }
  if (rule.custom) return `${rule.custom.kind} ${rule.custom.path}`;
  return ABSENT;
}

function actualPattern(rule: HttpRule): string {
  switch (rule.pattern.case) {
    case undefined:
      return ABSENT;
    case "custom":
      return `${rule.pattern.value.kind} ${rule.pattern.value.path}`;
    default:
      return `${rule.pattern.case.toUpperCase()} ${rule.pattern.value}`;
  }
}

/** Whether an HTTP rule binds a mutation: any verb but GET (a custom verb counts as one). */
function isMutation(rule: HttpRule | undefined): boolean {
  return rule !== undefined && rule.pattern.case !== undefined && rule.pattern.case !== "get";
}

/**
 * Compares the contract with the descriptors. Pure: reads nothing but its arguments.
 *
 * Extras: a field that the contract does not list is permitted (and reported) when its number is above every
 * number the contract gives that message and its name is not reserved; a method without `auth` in the
 * contract is not compared for auth (reported); an unscoped rule to which the contract gives no capability
 * may name the capabilities its handler filters by (reported: an unscoped method refuses no caller for
 * lacking them, it only narrows what the caller sees, so the policy is stated in the proto rather than in
 * code); a mutation (an HTTP binding other than GET) to which the contract gives no event may emit one
 * (reported: an event only adds deliveries for subscribers, RequestGroupAccess's for the group's owners). Any
 * other extra — file, message, enum, enum value, service, method, an event on a read — is a mismatch.
 */
export function compareWireContract(contract: WireContract, files: readonly DescFile[]): ContractComparison {
  let total = 0;
  let matched = 0;
  const mismatches: Mismatch[] = [];
  const extras: Extra[] = [];

  const check = (path: string, expected: unknown, actual: unknown): void => {
    total++;
    if (same(expected, actual)) matched++;
    else mismatches.push({ path, expected, actual });
  };
  /** A whole element is missing: all its facts count as unmatched, reported once. */
  const missing = (path: string, facts: number): void => {
    total += facts;
    mismatches.push({ path, expected: "present", actual: MISSING });
  };
  const extra = (path: string, detail: string): void => {
    mismatches.push({ path, expected: ABSENT, actual: detail });
  };

  const byName = new Map(files.map((f) => [f.proto.name, f]));
  // Where every type of the descriptors lives, to tell "in another file" from "missing".
  const typeHome = new Map<string, string>();
  for (const file of files) {
    for (const name of messagesOf(file).keys()) typeHome.set(name, file.proto.name);
    for (const name of enumsOf(file).keys()) typeHome.set(name, file.proto.name);
  }

  for (const fileName of byName.keys()) {
    if (!(fileName in contract.files)) extra(fileName, "file not in the contract");
  }

  for (const [fileName, cFile] of Object.entries(contract.files)) {
    const file = byName.get(fileName);
    const cMessages = cFile.messages ?? {};
    const cEnums = cFile.enums ?? {};
    const cServices = cFile.services ?? {};
    total++; // the file itself
    if (!file) {
      mismatches.push({ path: fileName, expected: "present", actual: MISSING });
      let facts = 1;
      for (const m of Object.values(cMessages)) facts += 1 + messageFacts(m);
      for (const values of Object.values(cEnums)) facts += 1 + values.length * 2;
      for (const methods of Object.values(cServices)) {
        facts += 1 + Object.values(methods).reduce((n, m) => n + 1 + methodFacts(m), 0);
      }
      total += facts;
      continue;
    }
    matched++;
    check(`${fileName} > package`, cFile.package, file.proto.package);

    // Messages
    const messages = messagesOf(file);
    for (const [messageName, cMessage] of Object.entries(cMessages)) {
      const mPath = `${fileName} > message ${messageName}`;
      const message = messages.get(messageName);
      total++;
      if (!message) {
        const home = typeHome.get(messageName);
        mismatches.push({ path: mPath, expected: "present", actual: home ? `declared in ${home}` : MISSING });
        total += messageFacts(cMessage);
        continue;
      }
      matched++;
      check(`${mPath} > mapEntry`, cMessage.mapEntry ?? false, message.options?.mapEntry ?? false);
      check(`${mPath} > reservedNames`, sorted(cMessage.reservedNames ?? []), sorted(message.reservedName));

      const cFieldNames = new Set(cMessage.fields.map((f) => f.name));
      const maxNumber = Math.max(0, ...cMessage.fields.map((f) => f.number));
      for (const cField of cMessage.fields) {
        const fPath = `${mPath} > field ${cField.name}`;
        const field = message.field.find((f) => f.name === cField.name);
        if (!field) {
          missing(fPath, 1 + FIELD_FACTS);
          continue;
        }
        total++;
        matched++;
        check(`${fPath} > number`, cField.number, field.number);
        check(`${fPath} > type`, cField.type, fieldTypeName(field));
        check(`${fPath} > repeated`, cField.repeated ?? false, field.label === FieldDescriptorProto_Label.REPEATED);
        check(`${fPath} > optional`, cField.optional ?? false, field.proto3Optional);
        check(`${fPath} > oneof`, cField.oneof ?? ABSENT, realOneofName(message, field) ?? ABSENT);
        check(`${fPath} > jsonName`, cField.jsonName ?? protoCamelCase(cField.name), field.jsonName);
        check(`${fPath} > behavior`, sorted(cField.behavior ?? []), sorted(behaviorNames(field)));
        check(`${fPath} > iamScope`, cField.iamScope ?? false, isIamScope(field));
      }
      for (const field of message.field) {
        if (cFieldNames.has(field.name)) continue;
        const fPath = `${mPath} > field ${field.name}`;
        if (field.number <= maxNumber) {
          extra(fPath, `extra field #${field.number}, not above the contract's highest number ${maxNumber}`);
        } else if ((cMessage.reservedNames ?? []).includes(field.name)) {
          extra(fPath, `extra field #${field.number} reuses a reserved name`);
        } else {
          extras.push({ path: fPath, detail: `extra field #${field.number} (contract's highest is ${maxNumber})` });
        }
      }
    }
    for (const messageName of messages.keys()) {
      if (!(messageName in cMessages)) extra(`${fileName} > message ${messageName}`, "message not in the contract");
    }

    // Enums
    const enums = enumsOf(file);
    for (const [enumName, cValues] of Object.entries(cEnums)) {
      const ePath = `${fileName} > enum ${enumName}`;
      const en = enums.get(enumName);
      total++;
      if (!en) {
        const home = typeHome.get(enumName);
        mismatches.push({ path: ePath, expected: "present", actual: home ? `declared in ${home}` : MISSING });
        total += cValues.length * 2;
        continue;
      }
      matched++;
      for (const cValue of cValues) {
        const vPath = `${ePath} > value ${cValue.name}`;
        const value = en.value.find((v) => v.name === cValue.name);
        if (!value) {
          missing(vPath, 2);
          continue;
        }
        total++;
        matched++;
        check(`${vPath} > number`, cValue.number, value.number);
      }
      const cValueNames = new Set(cValues.map((v) => v.name));
      for (const value of en.value) {
        if (!cValueNames.has(value.name)) extra(`${ePath} > value ${value.name}`, `enum value not in the contract (= ${value.number})`);
      }
    }
    for (const enumName of enums.keys()) {
      if (!(enumName in cEnums)) extra(`${fileName} > enum ${enumName}`, "enum not in the contract");
    }

    // Services
    for (const [serviceName, cMethods] of Object.entries(cServices)) {
      const sPath = `${fileName} > service ${serviceName}`;
      const service = file.services.find((s) => s.typeName === serviceName);
      total++;
      if (!service) {
        mismatches.push({ path: sPath, expected: "present", actual: MISSING });
        total += Object.values(cMethods).reduce((n, m) => n + 1 + methodFacts(m), 0);
        continue;
      }
      matched++;
      for (const [methodName, cMethod] of Object.entries(cMethods)) {
        const rPath = `${sPath} > rpc ${methodName}`;
        const method = service.methods.find((m) => m.name === methodName);
        if (!method) {
          missing(rPath, 1 + methodFacts(cMethod));
          continue;
        }
        total++;
        matched++;
        check(`${rPath} > input`, cMethod.input, method.input.typeName);
        check(`${rPath} > output`, cMethod.output, method.output.typeName);
        check(`${rPath} > streaming`, "unary", method.methodKind);
        compareHttp(`${rPath} > http`, cMethod.http, httpRuleOf(method));

        const rule = authRuleOf(method);
        if (!cMethod.auth) {
          extras.push({
            path: `${rPath} > auth`,
            detail: `contract gives no auth; not compared (descriptor: ${rule?.mode.case ?? "none"})`,
          });
        } else if (cMethod.auth.enabled) {
          const enabled = rule?.mode.case === "enabled" ? rule.mode.value : undefined;
          check(`${rPath} > auth`, "enabled", rule?.mode.case ?? ABSENT);
          const expected = sorted(cMethod.auth.enabled.capabilities ?? []);
          const actual = sorted((enabled?.capabilities ?? []).map((c) => valueName(CapabilitySchema, c)));
          if (expected.length === 0 && actual.length > 0 && cMethod.auth.enabled.unscoped && enabled?.unscoped) {
            total++;
            matched++;
            extras.push({ path: `${rPath} > auth.capabilities`, detail: `an unscoped rule filtering by ${actual.join(", ")} (the contract names none)` });
          } else {
            check(`${rPath} > auth.capabilities`, expected, actual);
          }
          check(`${rPath} > auth.unscoped`, cMethod.auth.enabled.unscoped ?? false, enabled?.unscoped ?? false);
        } else {
          check(`${rPath} > auth`, "disabled", rule?.mode.case ?? ABSENT);
        }

        const ev = eventRuleOf(method);
        if (cMethod.event) {
          check(`${rPath} > event`, "present", ev ? "present" : MISSING);
          check(`${rPath} > event.type`, cMethod.event.type, ev?.type);
          check(`${rPath} > event.extensions`, sorted(cMethod.event.extensions ?? []), sorted(ev?.extensions ?? []));
          check(
            `${rPath} > event.audience`,
            cMethod.event.audience ? `AUDIENCE_${cMethod.event.audience}` : "AUDIENCE_UNSPECIFIED",
            ev ? valueName(AudienceSchema, ev.audience) : MISSING,
          );
        } else if (ev && isMutation(httpRuleOf(method))) {
          total++;
          matched++;
          extras.push({ path: `${rPath} > event`, detail: `a mutation the contract gives no event emits ${ev.type}` });
        } else {
          check(`${rPath} > event`, ABSENT, ev ? `event ${ev.type}` : ABSENT);
        }
      }
      for (const method of service.methods) {
        if (!(method.name in cMethods)) extra(`${sPath} > rpc ${method.name}`, "method not in the contract");
      }
    }
    for (const service of file.services) {
      if (!(service.typeName in cServices)) extra(`${fileName} > service ${service.typeName}`, "service not in the contract");
    }
  }

  function compareHttp(path: string, expected: ContractHttpRule | undefined, actual: HttpRule | undefined): void {
    if (!expected) {
      check(path, ABSENT, actual ? actualPattern(actual) : ABSENT);
      return;
    }
    if (!actual) {
      missing(path, httpFacts(expected));
      return;
    }
    check(`${path} > pattern`, contractPattern(expected), actualPattern(actual));
    check(`${path} > body`, expected.body ?? "", actual.body);
    check(`${path} > response_body`, expected.responseBody ?? "", actual.responseBody);
    const cBindings = expected.additionalBindings ?? [];
    check(`${path} > additional_bindings.length`, cBindings.length, actual.additionalBindings.length);
    cBindings.forEach((binding, i) => compareHttp(`${path} > additional_bindings[${i}]`, binding, actual.additionalBindings[i]));
  }

  return { total, matched, mismatches, extras };
}

/** `wire contract: 4321/4321 facts match (100.00%)` */
export function summaryLine(result: ContractComparison): string {
  const pct = result.total === 0 ? 0 : (100 * result.matched) / result.total;
  return `wire contract: ${result.matched}/${result.total} facts match (${pct.toFixed(2)}%)`;
}

/** The summary, the first `limit` mismatches and the permitted extras, one per line. */
export function formatReport(result: ContractComparison, limit = 50): string {
  const lines = [summaryLine(result)];
  if (result.mismatches.length > 0) {
    lines.push(`mismatches (${result.mismatches.length}${result.mismatches.length > limit ? `, first ${limit}` : ""}):`);
    for (const m of result.mismatches.slice(0, limit)) {
      lines.push(`  ${m.path}: expected ${JSON.stringify(m.expected)}, actual ${JSON.stringify(m.actual)}`);
    }
  }
  if (result.extras.length > 0) {
    lines.push(`permitted deviations (${result.extras.length}):`);
    for (const e of result.extras) lines.push(`  ${e.path}: ${e.detail}`);
  }
  return lines.join("\n");
}
