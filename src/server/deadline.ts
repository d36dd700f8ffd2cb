// Every call has a deadline: the server's (requestTimeoutMs), or a shorter one the client asks for with
// grpc-timeout or connect-timeout-ms (a longer one is capped to the server's). When it passes, the call
// answers DEADLINE_EXCEEDED at once, whether or not its handler notices: the handler's signal is aborted, and
// a unit of work still running then rolls back instead of committing (unit-of-work.ts), so a change is never
// made behind an answer that says the call failed.
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import type { UniversalHandler, UniversalServerRequest } from "@connectrpc/connect/protocol";
import { deadlineExceeded } from "../kernel/errors/index.js";
import { CallControl, callControlKey, cappedGrpcTimeoutMs, clientDeadlinePassed } from "../kernel/invoke.js";

/**
 * The deadline interceptor (after the error boundary, before authentication, so the whole call is bounded).
 * Unary calls only: streams (reflection, health watches) live as long as their client keeps them.
 */
export function createDeadline(timeoutMs: number): Interceptor {
  const passed = () => deadlineExceeded(`The call did not complete within its deadline of ${timeoutMs} ms`);
  return (next) => async (req) => {
    if (req.stream) return next(req);
    // A call run in process (gRPC unary path, REST gateway) carries its control: the deadline is armed on it,
    // and the method raced against the call being cut short (deadline or client gone), with no signal made.
    const control = req.contextValues.get(callControlKey);
    if (control) {
      control.arm(timeoutMs, passed);
      return await Promise.race([next(req), control.cutShort()]);
    }
    // Over Connect's handlers: a control of the call's own, cut short by this deadline or by the client's
    // signal (Connect's own timer, or the client going away) with the reason the call answers; the method
    // sees its signal. (AbortSignal.any would do the same at several times the cost per call: it builds a
    // composite signal with weak references to its sources.)
    const own = new CallControl();
    const onClientAbort = () => own.abort(abortReason(req.signal.reason));
    own.arm(timeoutMs, passed);
    if (req.signal.aborted) onClientAbort();
    else req.signal.addEventListener("abort", onClientAbort, { once: true });
    try {
      return await Promise.race([next({ ...req, signal: own.signal }), own.cutShort()]);
    } finally {
      req.signal.removeEventListener("abort", onClientAbort);
      own.end();
    }
  };
}

/** Why the client's side cut the call short, as the client sees it. */
function abortReason(reason: unknown): ConnectError {
  if (reason instanceof ConnectError) {
    // Connect's own timer for the client's timeout: a structured error like the server's own.
    return reason.code === Code.DeadlineExceeded ? clientDeadlinePassed() : reason;
  }
  return new ConnectError("The client canceled the call", Code.Canceled);
}

/**
 * Caps the timeout a client asks for (grpc-timeout for gRPC and gRPC-web, connect-timeout-ms for Connect) to
 * the server's deadline: one at least as long is removed from the request headers before Connect reads them,
 * so the server's deadline governs the call (Connect would otherwise refuse a timeout above its maximum, or
 * time out at once past 2^31 ms, Node's timer limit). Malformed values are left for Connect to refuse.
 */
export function withClientTimeoutCap(handler: UniversalHandler, maxMs: number): UniversalHandler {
  const wrapped = (req: UniversalServerRequest) => {
    const grpc = req.header.get("grpc-timeout");
    if (grpc !== null && cappedGrpcTimeoutMs(grpc, maxMs) === undefined) req.header.delete("grpc-timeout");
    const connect = req.header.get("connect-timeout-ms");
    if (connect !== null && /^\d{1,10}$/.test(connect) && Number(connect) >= maxMs) req.header.delete("connect-timeout-ms");
    return handler(req);
  };
  return Object.assign(wrapped, handler);
}
