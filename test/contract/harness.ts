// The contract-test harness: a case is written once and run over every protocol against a real server on
// a real port. gRPC (HTTP/2 cleartext), gRPC-web, Connect JSON and Connect binary (over HTTP/2) go through
// Connect's own clients; REST requests are derived from the method's google.api.http binding, so a case
// never spells a URL. Every outcome is normalized to {message} or {error: code, message, decoded details}.
import { create, fromJson, toJson, type DescMessage, type DescMethodUnary, type JsonObject, type JsonValue, type Message, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import { anyUnpack, AnySchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { httpRuleOf, registry } from "../../src/kernel/descriptors.js";
import { httpStatusOf } from "../../src/kernel/errors/index.js";
import { BadRequestSchema, ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { registerAuthorization, registerSecretsOf } from "../support/secrets.js";

export type Protocol = "grpc" | "grpc-web" | "connect-json" | "connect-binary-h2" | "rest";
export const protocols: readonly Protocol[] = ["grpc", "grpc-web", "connect-json", "connect-binary-h2", "rest"];

export interface CallError {
  code: Code;
  message: string;
  details: Message[];
  /** REST only: the HTTP status of the response. */
  httpStatus?: number;
}

export type Outcome<O extends DescMessage> = { message: MessageShape<O>; error?: undefined } | { message?: undefined; error: CallError };

/** Finds a decoded detail of the given type. */
export function detail<D extends DescMessage>(err: CallError, schema: D): MessageShape<D> | undefined {
  return err.details.find((d) => d.$typeName === schema.typeName) as MessageShape<D> | undefined;
}

function transportFor(protocol: Exclude<Protocol, "rest">, baseUrl: string): Transport {
  switch (protocol) {
    case "grpc":
      return createGrpcTransport({ baseUrl });
    case "grpc-web":
      return createGrpcWebTransport({ baseUrl, httpVersion: "1.1" });
    case "connect-json":
      return createConnectTransport({ baseUrl, httpVersion: "1.1", jsonOptions: { registry } });
    case "connect-binary-h2":
      return createConnectTransport({ baseUrl, httpVersion: "2", useBinaryFormat: true });
  }
}

function fromConnectError(err: unknown): CallError {
  const e = ConnectError.from(err);
  const details: Message[] = [];
  for (const d of e.details) {
    if ("desc" in d) continue;
    const desc = registry.getMessage(d.type);
    if (!desc) throw new Error(`undecodable error detail ${d.type}`);
    details.push(e.findDetails(desc)[0] as Message);
  }
  return { code: e.code, message: e.rawMessage, details };
}

/** Encodes a request as REST from the method's HTTP binding: path variables, body, then query parameters. */
export function restRequestOf<I extends DescMessage>(method: DescMethodUnary<I>, request: MessageShape<I>): { verb: string; path: string; body?: string } {
  const rule = httpRuleOf(method);
  if (!rule || rule.pattern.case === undefined || rule.pattern.case === "custom") throw new Error(`${method.name} has no REST binding`);
  const verb = rule.pattern.case.toUpperCase();
  const template = rule.pattern.value;
  const json = toJson(method.input, request, { registry }) as JsonObject;
  const jsonNameOf = (protoPath: string[]): string[] => {
    let msg: DescMessage | undefined = method.input;
    return protoPath.map((p) => {
      const f = msg?.fields.find((x) => x.name === p);
      if (!f) throw new Error(`unknown field ${p} in template ${template}`);
      msg = f.fieldKind === "message" ? f.message : undefined;
      return f.jsonName;
    });
  };
  const take = (jsonPath: string[]): JsonValue | undefined => {
    let parent: JsonObject | undefined = json;
    for (const key of jsonPath.slice(0, -1)) parent = parent?.[key] as JsonObject | undefined;
    const last = jsonPath[jsonPath.length - 1]!;
    const value = parent?.[last];
    if (parent) delete parent[last];
    return value;
  };
  const path = template.replace(/\{([^}=]+)(?:=([^}]*))?\}/g, (_m, field: string, pattern?: string) => {
    const value = take(jsonNameOf(field.split(".")));
    const text = typeof value === "string" ? value : "";
    return pattern === "**" ? text.split("/").map(encodeURIComponent).join("/") : encodeURIComponent(text);
  });
  let body: string | undefined;
  if (rule.body === "*") {
    body = JSON.stringify(json);
    for (const k of Object.keys(json)) delete json[k];
  } else if (rule.body) {
    body = JSON.stringify(take(jsonNameOf([rule.body])) ?? {});
  }
  // Singular messages field by field (`uidp.childrenOf=x`); an element of a repeated message as its JSON
  // object (`imageRefs={"repo":"nginx"}`), the gateway's form for what dotted keys cannot say.
  const params = new URLSearchParams();
  const flatten = (prefix: string, value: JsonValue): void => {
    if (Array.isArray(value)) value.forEach((v) => (v !== null && typeof v === "object" ? params.append(prefix, JSON.stringify(v)) : flatten(prefix, v)));
    else if (value !== null && typeof value === "object") for (const [k, v] of Object.entries(value)) flatten(prefix ? `${prefix}.${k}` : k, v);
    else params.append(prefix, String(value));
  };
  flatten("", json);
  const query = params.toString();
  return { verb, path: query ? `${path}?${query}` : path, ...(body !== undefined ? { body } : {}) };
}

async function callRest<I extends DescMessage, O extends DescMessage>(
  baseUrl: string,
  method: DescMethodUnary<I, O>,
  request: MessageShape<I>,
  headers: Record<string, string>,
): Promise<Outcome<O>> {
  const { verb, path, body } = restRequestOf(method, request);
  const res = await fetch(baseUrl + path, {
    method: verb,
    headers: { ...headers, ...(body !== undefined ? { "content-type": "application/json" } : {}) },
    ...(body !== undefined ? { body } : {}),
  });
  const text = await res.text();
  let payload: JsonValue;
  try {
    payload = JSON.parse(text) as JsonValue;
  } catch {
    throw new Error(`REST ${verb} ${path}: HTTP ${res.status} with a non-JSON body: ${text.slice(0, 200)}`);
  }
  if (res.ok) return { message: fromJson(method.output, payload, { registry }) };
  const status = payload as { code?: number; message?: string; details?: JsonValue[] };
  const details = (status.details ?? []).map((d) => {
    const any = fromJson(AnySchema, d, { registry });
    const unpacked = anyUnpack(any, registry);
    if (!unpacked) throw new Error(`undecodable REST error detail ${JSON.stringify(d)}`);
    return unpacked;
  });
  return { error: { code: status.code as Code, message: status.message ?? "", details, httpStatus: res.status } };
}

/** Calls one method over one protocol. */
export async function call<I extends DescMessage, O extends DescMessage>(
  protocol: Protocol,
  baseUrl: string,
  method: DescMethodUnary<I, O>,
  request: MessageInitShape<I>,
  headers: Record<string, string> = {},
): Promise<Outcome<O>> {
  return caller(protocol, baseUrl)(method, request, headers);
}

/**
 * A client of one protocol that keeps its transport (its HTTP/2 connection) across calls, as a long-lived
 * client would; `call` makes a new one each time. The soak benchmark (bench/soak.ts) calls through it.
 */
export function caller(protocol: Protocol, baseUrl: string) {
  const transport = protocol === "rest" ? undefined : transportFor(protocol, baseUrl);
  return async <I extends DescMessage, O extends DescMessage>(
    method: DescMethodUnary<I, O>,
    request: MessageInitShape<I>,
    headers: Record<string, string> = {},
  ): Promise<Outcome<O>> => {
    const message = create(method.input, request);
    // What the call carries that must never be logged (test/support/log-capture.ts checks every log line).
    registerAuthorization(headers);
    registerSecretsOf(method.input, message);
    if (!transport) {
      const out = await callRest(baseUrl, method, message, headers);
      registerSecretsOf(method.output, out.message);
      return out;
    }
    try {
      const res = await transport.unary(method, undefined, undefined, headers, message);
      registerSecretsOf(method.output, res.message);
      return { message: res.message };
    } catch (err) {
      return { error: fromConnectError(err) };
    }
  };
}

export interface ExpectedError {
  code: Code;
  reason?: string;
  domain?: string;
  message?: string | RegExp;
  /** Expected details, each checked with toMatchObject against the decoded detail of the same type. */
  details?: Array<{ schema: DescMessage; value: Record<string, unknown> }>;
}

/** INVALID_ARGUMENT whose BadRequest names `field` (first violation). */
export function invalidField(field: string): ExpectedError {
  return { code: Code.InvalidArgument, details: [{ schema: BadRequestSchema, value: { fieldViolations: [{ field }] } }] };
}

export interface ContractCase<I extends DescMessage = DescMessage, O extends DescMessage = DescMessage> {
  name: string;
  method: DescMethodUnary<I, O>;
  /** The request, or a function giving it when the test runs (for uids seeded in beforeAll). */
  request?: MessageInitShape<I> | (() => MessageInitShape<I>);
  headers?: Record<string, string> | (() => Record<string, string>);
  /** Expected success: checks on the response message. */
  response?: (message: MessageShape<O>) => void;
  /** Expected failure. */
  error?: ExpectedError;
  /** Limit the case to some protocols (rarely needed). */
  only?: readonly Protocol[];
}

/** Asserts what every error must carry on every protocol, then the case's own expectations. */
export function assertError(protocol: Protocol, got: CallError, want: ExpectedError): void {
  expect(Code[got.code], `code (message: ${got.message})`).toBe(Code[want.code]);
  const info = detail(got, ErrorInfoSchema);
  expect(info, "every error carries google.rpc.ErrorInfo").toBeDefined();
  expect(info!.reason).not.toBe("");
  expect(info!.domain).not.toBe("");
  if (want.reason) expect(info!.reason).toBe(want.reason);
  if (want.domain) expect(info!.domain).toBe(want.domain);
  if (typeof want.message === "string") expect(got.message).toBe(want.message);
  else if (want.message) expect(got.message).toMatch(want.message);
  for (const d of want.details ?? []) {
    const found = got.details.find((x) => x.$typeName === d.schema.typeName);
    expect(found, `detail ${d.schema.typeName}`).toBeDefined();
    expect(found).toMatchObject(d.value);
  }
  if (protocol === "rest") expect(got.httpStatus).toBe(httpStatusOf(want.code));
}

/** Registers one vitest test per (protocol, case). `baseUrl` is read when the tests run. */
export function runContractCases(title: string, baseUrl: () => string, cases: readonly ContractCase[]): void {
  describe.each(protocols)(`${title} [%s]`, (protocol) => {
    for (const c of cases) {
      if (c.only && !c.only.includes(protocol)) continue;
      it(c.name, async () => {
        const request = typeof c.request === "function" ? c.request() : (c.request ?? {});
        const headers = typeof c.headers === "function" ? c.headers() : c.headers;
        const out = await call(protocol, baseUrl(), c.method, request, headers);
        if (c.error) {
          expect(out.error, `expected ${Code[c.error.code]}, got a response`).toBeDefined();
          assertError(protocol, out.error!, c.error);
        } else {
          expect(out.error, out.error ? `unexpected error ${Code[out.error.code]}: ${out.error.message}` : "").toBeUndefined();
          c.response?.(out.message!);
        }
      });
    }
  });
}

/** Declares a case with its method's request and response types checked, for a mixed case table. */
export function contractCase<I extends DescMessage, O extends DescMessage>(c: ContractCase<I, O>): ContractCase {
  return c as unknown as ContractCase;
}
