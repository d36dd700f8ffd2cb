// A unary method called in process: the implementation Connect's router holds, run through the same
// interceptors with a handler context of the call, by the rules Connect's own protocol handlers follow, but
// with the request message already decoded and the answer left as a message. The REST gateway
// (gateway/gateway.ts) and the gRPC unary path (server/grpc-unary.ts) call methods this way; each encodes the
// answer once itself.
import { create, isMessage, type DescMethodUnary, type Message } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createContextKey,
  createServiceImplSpec,
  type ConnectRouter,
  type ContextValues,
  type HandlerContext,
  type Interceptor,
  type MethodImplSpec,
  type UnaryRequest,
  type UnaryResponse,
} from "@connectrpc/connect";
import { deadlineExceeded } from "./errors/index.js";

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

/** The context value under which an in-process call carries its CallControl (the deadline interceptor arms it). */
export const callControlKey = createContextKey<CallControl | undefined>(undefined, { description: "the in-process call's control" });

/** The error a call answers when the deadline its client set passes. */
export const clientDeadlinePassed = (): ConnectError => deadlineExceeded("The call did not complete within the deadline the client set");

const GRPC_TIMEOUT = /^(\d{1,8})([HMSmun])$/;
const GRPC_UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1_000, m: 1, u: 1e-3, n: 1e-6 };

/** A grpc-timeout header's value in ms (the gRPC protocol's form: up to 8 digits and a unit); undefined when malformed. */
function grpcTimeoutMs(value: string): number | undefined {
  const match = GRPC_TIMEOUT.exec(value);
  return match ? Number(match[1]) * GRPC_UNIT_MS[match[2]!]! : undefined;
}

/**
 * The client's grpc-timeout as the call keeps it: undefined when there is none or when the server's own
 * deadline (`maxMs`) is no longer (the server's then governs), NaN when it is malformed, else its ms.
 */
export function cappedGrpcTimeoutMs(value: string | string[] | undefined, maxMs: number): number | undefined {
  if (value === undefined) return undefined;
  const ms = typeof value === "string" ? grpcTimeoutMs(value) : undefined;
  if (ms === undefined) return NaN;
  return ms >= maxMs ? undefined : ms;
}

/**
 * How an in-process call is cut short (its client goes away, a deadline passes), and its signal. The signal
 * (an AbortController) is made only when something reads it, and aborted at the end only if made: making a
 * signal and aborting it cost about 5 µs a call (measured alone: bench/LOG.md, "What changed"), and most calls
 * never read it. The deadline interceptor races the method against `cutShort()` instead of a signal listener.
 */
export class CallControl {
  #controller: AbortController | undefined;
  #reason: unknown = undefined;
  #done = false;
  #reject: ((reason: unknown) => void) | undefined;
  #timers: NodeJS.Timeout[] = [];

  /** The call's signal: aborted with the reason the call was cut short, or CALL_ENDED once it answered. */
  get signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#done) this.#controller.abort(this.#reason);
    }
    return this.#controller.signal;
  }

  /** Whether the call was cut short or has ended. */
  get aborted(): boolean {
    return this.#done;
  }

  /** Why: the reason given to abort(), CALL_ENDED after end(), undefined while the call runs. */
  get reason(): unknown {
    return this.#reason;
  }

  /** Cuts the call short with `reason` (the first reason wins). */
  abort(reason: unknown): void {
    if (this.#done) return;
    this.#done = true;
    this.#reason = reason;
    this.#controller?.abort(reason);
    this.#reject?.(reason);
  }

  /** Cuts the call short with `reason()` once `ms` have passed (at once when `ms` <= 0), unless it has ended. */
  arm(ms: number, reason: () => unknown): void {
    if (ms <= 0) return this.abort(reason());
    this.#timers.push(setTimeout(() => this.abort(reason()), ms));
  }

  /** Rejects with the reason once the call is cut short; for one racer (the deadline interceptor). */
  cutShort(): Promise<never> {
    if (this.#done) return Promise.reject(this.#reason);
    return new Promise<never>((_, reject) => {
      this.#reject = reject;
    });
  }

  /** The call answered: its timers are cleared, and its signal, if one was made, is aborted with CALL_ENDED. */
  end(): void {
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.length = 0;
    if (this.#done) return;
    this.#done = true;
    this.#reason = CALL_ENDED;
    // With a reason given, aborting builds no DOMException (AbortController.abort() builds one otherwise).
    this.#controller?.abort(CALL_ENDED);
  }
}

export interface InProcessCall {
  method: DescMethodUnary;
  /** The handler context's protocolName: "rest", "grpc". */
  protocolName: string;
  /** The HTTP method of the request. */
  requestMethod: string;
  url: string;
  /**
   * The call's control: the caller aborts it when the client goes away (CLIENT_GONE); its signal is the
   * context's (aborted with DEADLINE_EXCEEDED when a deadline passes, and with a fixed reason at the end).
   */
  control: CallControl;
  requestHeader: Headers;
  contextValues: ContextValues;
  /** The deadline the client asked for, if any (the server's own is the deadline interceptor's). */
  timeoutMs?: number | undefined;
  /** The headers and trailers the response starts with (a method adds to them). */
  responseHeader?: Record<string, string>;
  responseTrailer?: Record<string, string>;
}

/** The outcome of a call: its answer or its error (anything but a ConnectError is INTERNAL), and what it set. */
type InProcessResult =
  | { ok: true; output: Message; responseHeader: Headers; responseTrailer: Headers }
  | { ok: false; error: ConnectError; responseHeader: Headers; responseTrailer: Headers };

/**
 * The request an in-process call hands its interceptors. A class, with `signal` read through the prototype:
 * an object literal's getter (`{ get signal() {...} }`) makes the object a dictionary and keeps its closure,
 * with everything the closure reaches (the call's control, headers, values, message), alive through V8's
 * young-generation collections until the next full one. Every call's objects were then copied and promoted:
 * about 1.7 MB per scavenge, and 2 to 7 ms each, under load (bench/LOG.md, "a getter that kept every call
 * alive").
 *
 * `signal` is not an own property, so a copy of the request (`{ ...req }`) has none unless the interceptor
 * that copies it sets one (as the deadline interceptor does over Connect's handlers); the handler context
 * then gives the call's own signal.
 */
class InProcessRequest implements UnaryRequest {
  readonly stream = false as const;
  readonly service: UnaryRequest["service"];
  readonly #control: CallControl;

  constructor(
    readonly method: DescMethodUnary,
    readonly message: Message,
    readonly requestMethod: string,
    readonly url: string,
    readonly header: Headers,
    readonly contextValues: ContextValues,
    control: CallControl,
  ) {
    this.service = method.parent;
    this.#control = control;
  }

  get signal(): AbortSignal {
    return this.#control.signal;
  }
}

/**
 * The handler context of an in-process call: Connect's fields, the signal and the remaining time read
 * through the prototype (see InProcessRequest for why not an object literal with a getter). The signal is
 * the one of the request the method was handed, or the call's own when that request carries none.
 */
class InProcessContext implements HandlerContext {
  readonly service: HandlerContext["service"];
  readonly method: DescMethodUnary;
  readonly protocolName: string;
  readonly requestMethod: string;
  readonly url: string;
  readonly requestHeader: Headers;
  readonly values: ContextValues;
  readonly #req: UnaryRequest;
  readonly #control: CallControl;
  readonly #deadline: Deadline;

  constructor(
    req: UnaryRequest,
    call: InProcessCall,
    readonly responseHeader: Headers,
    readonly responseTrailer: Headers,
    deadline: Deadline,
  ) {
    this.service = req.service;
    this.method = call.method;
    this.protocolName = call.protocolName;
    this.requestMethod = call.requestMethod;
    this.url = call.url;
    this.requestHeader = req.header;
    this.values = req.contextValues;
    this.#req = req;
    this.#control = call.control;
    this.#deadline = deadline;
  }

  get signal(): AbortSignal {
    return (this.#req.signal as AbortSignal | undefined) ?? this.#control.signal;
  }

  timeoutMs(): number | undefined {
    const at = this.#deadline.at;
    return at === undefined ? undefined : at - Date.now();
  }
}

/** When the client's deadline passes (ms since the epoch); cleared once the call has answered. */
interface Deadline {
  at: number | undefined;
}

/**
 * Runs the method through the interceptors, as Connect's invokeUnaryImplementation does (the first
 * interceptor outermost; the answer normalized to the output type; headers and trailers an interceptor
 * replaced copied back), with the handler context built here: one CallControl for its signal instead of
 * Connect's three linked AbortControllers, and that signal read only if the method or an interceptor reads it.
 */
export async function invokeInProcess(spec: UnaryImplSpec, call: InProcessCall, message: Message, interceptors: readonly Interceptor[]): Promise<InProcessResult> {
  const { control, timeoutMs, method } = call;
  const deadline: Deadline = { at: timeoutMs === undefined ? undefined : Date.now() + timeoutMs };
  const values = call.contextValues;
  values.set(callControlKey, control);
  const responseHeader = new Headers(call.responseHeader);
  const responseTrailer = new Headers(call.responseTrailer);
  const request = new InProcessRequest(method, message, call.requestMethod, call.url, call.requestHeader, values, control);
  const run = async (req: UnaryRequest): Promise<UnaryResponse> => {
    const output = await spec.impl(req.message as never, new InProcessContext(req, call, responseHeader, responseTrailer, deadline));
    return { stream: false, message: isMessage(output, method.output) ? output : create(method.output, output as never), method, service: method.parent, header: responseHeader, trailer: responseTrailer };
  };
  try {
    // Inside the try: whatever throws is answered, and the control ended (its timers cleared).
    if (timeoutMs !== undefined) control.arm(timeoutMs, clientDeadlinePassed);
    let next: (req: UnaryRequest) => Promise<UnaryResponse> = run;
    for (let i = interceptors.length - 1; i >= 0; i--) next = interceptors[i]!(next as never) as typeof next;
    const res = await next(request);
    if (res.header !== responseHeader) replaceHeaders(responseHeader, res.header);
    if (res.trailer !== responseTrailer) replaceHeaders(responseTrailer, res.trailer);
    return { ok: true, output: res.message as Message, responseHeader, responseTrailer };
  } catch (e) {
    // As Connect's handlers answer: anything but a ConnectError is an internal error.
    const error = e instanceof ConnectError ? e : new ConnectError("internal error", Code.Internal, undefined, undefined, e);
    return { ok: false, error, responseHeader, responseTrailer };
  } finally {
    deadline.at = undefined;
    control.end();
  }
}

/** `to` made equal to `from` (Connect's copyHeaders). */
function replaceHeaders(to: Headers, from: Headers): void {
  for (const name of [...to.keys()]) to.delete(name);
  from.forEach((value, name) => to.set(name, value));
}

/** The reason a call's control is aborted with when its client goes away (a reset stream, a closed socket). */
export const CLIENT_GONE = new ConnectError("the client canceled the call", Code.Canceled);

/** Whether the call's client went away (not merely: the call has ended, or its timeout passed). */
export function clientGone(control: CallControl): boolean {
  return control.reason === CLIENT_GONE;
}

/** The reason a call's signal carries once the call has answered. */
const CALL_ENDED = new ConnectError("the call has ended", Code.Canceled);
