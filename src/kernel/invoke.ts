// A unary method called in process: the implementation Connect's router holds, run through the same
// interceptors with a handler context of the call, as Connect's own protocol handlers run it, but with the
// request message already decoded and the answer left as a message. The REST gateway (gateway/gateway.ts)
// and the gRPC unary path (server/grpc-unary.ts) call methods this way; each encodes the answer once itself.
import type { DescMethodUnary, Message } from "@bufbuild/protobuf";
import { Code, ConnectError, createHandlerContext, createServiceImplSpec, type ConnectRouter, type ContextValues, type Interceptor, type MethodImplSpec } from "@connectrpc/connect";
import { invokeUnaryImplementation } from "@connectrpc/connect/protocol";

export type UnaryImplSpec = Extract<MethodImplSpec, { kind: "unary" }>;

/** "chainguard.platform.registry.v2.ReposService/GetRepo". */
export function procedureOf(method: { name: string; parent: { typeName: string } }): string {
  return `${method.parent.typeName}/${method.name}`;
}

/**
 * The implementation of each unary method the services registered by `register` (router.service) serve,
 * keyed "<service>/<method>"; a method a service leaves out answers UNIMPLEMENTED, as on Connect's router.
 */
export function unaryImplementationsOf(register: (router: ConnectRouter) => void): Map<string, UnaryImplSpec> {
  const specs = new Map<string, UnaryImplSpec>();
  const router: ConnectRouter = {
    handlers: [],
    service(service, implementation) {
      const spec = createServiceImplSpec(service, implementation);
      for (const m of Object.values(spec.methods)) if (m.kind === "unary") specs.set(procedureOf(m.method), m);
      return router;
    },
    rpc() {
      throw new Error("in-process calls take services (router.service), not single methods");
    },
  };
  register(router);
  return specs;
}

export interface InProcessCall {
  method: DescMethodUnary;
  /** The handler context's protocolName: "rest", "grpc". */
  protocolName: string;
  /** The HTTP method of the request. */
  requestMethod: string;
  url: string;
  /** Aborted when the client goes away. */
  signal: AbortSignal;
  requestHeader: Headers;
  contextValues: ContextValues;
  /** The deadline the client asked for, if any (the server's own is the deadline interceptor's). */
  timeoutMs?: number | undefined;
  /** The headers and trailers the response starts with (a method adds to them). */
  responseHeader?: Record<string, string>;
  responseTrailer?: Record<string, string>;
}

/** The outcome of a call: its answer or its error (anything but a ConnectError is INTERNAL), and what it set. */
export type InProcessResult =
  | { ok: true; output: Message; responseHeader: Headers; responseTrailer: Headers }
  | { ok: false; error: ConnectError; responseHeader: Headers; responseTrailer: Headers };

export async function invokeInProcess(spec: UnaryImplSpec, call: InProcessCall, message: Message, interceptors: readonly Interceptor[]): Promise<InProcessResult> {
  const context = createHandlerContext({
    service: call.method.parent,
    method: call.method,
    protocolName: call.protocolName,
    requestMethod: call.requestMethod,
    url: call.url,
    timeoutMs: call.timeoutMs,
    requestSignal: call.signal,
    requestHeader: call.requestHeader,
    responseHeader: call.responseHeader,
    responseTrailer: call.responseTrailer,
    contextValues: call.contextValues,
  });
  try {
    const output = (await invokeUnaryImplementation(spec, context, message, [...interceptors])) as Message;
    return { ok: true, output, responseHeader: context.responseHeader, responseTrailer: context.responseTrailer };
  } catch (e) {
    // As Connect's handlers answer: anything but a ConnectError is an internal error.
    const error = e instanceof ConnectError ? e : new ConnectError("internal error", Code.Internal, undefined, undefined, e);
    return { ok: false, error, responseHeader: context.responseHeader, responseTrailer: context.responseTrailer };
  } finally {
    // Ends the call's signal (and its client-timeout timer). With a reason given, aborting makes no
    // DOMException, which AbortController.abort() builds for every call otherwise.
    context.abort(CALL_ENDED);
  }
}

/** The reason a call's signal carries once the call has answered. */
const CALL_ENDED = new ConnectError("the call has ended", Code.Canceled);
