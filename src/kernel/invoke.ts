// A unary method called in process: the implementation Connect's router holds, run through the same
// interceptors with a handler context of the call, as Connect's own protocol handlers run it, but with the
// request message already decoded and the answer left as a message. The REST gateway (gateway/gateway.ts)
// and the gRPC unary path (server/grpc-unary.ts) call methods this way; each encodes the answer once itself.
import type { DescMethodUnary, Message } from "@bufbuild/protobuf";
import { Code, ConnectError, createServiceImplSpec, type ConnectRouter, type ContextValues, type HandlerContext, type Interceptor, type MethodImplSpec } from "@connectrpc/connect";
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
  /**
   * The call's one controller: the caller aborts it when the client goes away; its signal is the context's
   * (aborted with DEADLINE_EXCEEDED when the client's timeout passes, and with a fixed reason at the end).
   */
  controller: AbortController;
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
  // The handler context as Connect's createHandlerContext makes it, with the caller's controller as its one
  // signal: Connect's links a deadline controller and a second one to the request's signal, three
  // AbortControllers per call where one does (their creation was a twentieth of a point read's CPU).
  const { controller, timeoutMs } = call;
  let timer: NodeJS.Timeout | undefined;
  let deadlineAt: number | undefined;
  if (timeoutMs !== undefined) {
    deadlineAt = Date.now() + timeoutMs;
    const expire = () => controller.abort(new ConnectError("the operation timed out", Code.DeadlineExceeded));
    if (timeoutMs <= 0) expire();
    else timer = setTimeout(expire, timeoutMs);
  }
  const context: HandlerContext = {
    service: call.method.parent,
    method: call.method,
    protocolName: call.protocolName,
    requestMethod: call.requestMethod,
    url: call.url,
    signal: controller.signal,
    timeoutMs: () => (deadlineAt === undefined ? undefined : deadlineAt - Date.now()),
    requestHeader: call.requestHeader,
    responseHeader: new Headers(call.responseHeader),
    responseTrailer: new Headers(call.responseTrailer),
    values: call.contextValues,
  };
  try {
    const output = (await invokeUnaryImplementation(spec, context, message, interceptors as Interceptor[])) as Message;
    return { ok: true, output, responseHeader: context.responseHeader, responseTrailer: context.responseTrailer };
  } catch (e) {
    // As Connect's handlers answer: anything but a ConnectError is an internal error.
    const error = e instanceof ConnectError ? e : new ConnectError("internal error", Code.Internal, undefined, undefined, e);
    return { ok: false, error, responseHeader: context.responseHeader, responseTrailer: context.responseTrailer };
  } finally {
    clearTimeout(timer);
    // Ends the call's signal. With a reason given, aborting makes no DOMException, which
    // AbortController.abort() builds otherwise.
    if (!controller.signal.aborted) controller.abort(CALL_ENDED);
  }
}

/** The reason a call's controller is aborted with when its client goes away (a reset stream, a closed socket). */
export const CLIENT_GONE = new ConnectError("the client canceled the call", Code.Canceled);

/** Whether the call's client went away (not merely: the call has ended, or its timeout passed). */
export function clientGone(controller: AbortController): boolean {
  return controller.signal.aborted && controller.signal.reason === CLIENT_GONE;
}

/** The reason a call's signal carries once the call has answered. */
const CALL_ENDED = new ConnectError("the call has ended", Code.Canceled);
