// In-process calls (kernel/invoke.ts): the call's control (its signal made only when read, cut short by a
// deadline or the client, ended once the call answers) and the method run through the interceptors as
// Connect's own invokeUnaryImplementation runs it.
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import { afterEach, describe, expect, it, vi } from "vitest";
import { PingRequestSchema, PingService } from "../../gen/chainguard/platform/ping/v2/ping_pb.js";
import { CallControl, callControlKey, CLIENT_GONE, clientGone, invokeInProcess, unaryImplementationsOf, type InProcessCall } from "../../src/kernel/invoke.js";

afterEach(() => {
  vi.useRealTimers();
});

describe("CallControl", () => {
  it("makes no signal until one is read; a signal read after the call was cut short is already aborted", () => {
    const control = new CallControl();
    expect(control.aborted).toBe(false);
    control.abort(CLIENT_GONE);
    control.abort(new Error("later reasons do not win"));
    expect(clientGone(control)).toBe(true);
    expect(control.signal.aborted).toBe(true);
    expect(control.signal.reason).toBe(CLIENT_GONE);
  });

  it("aborts a signal already read, and rejects the racer, with the first reason", async () => {
    const control = new CallControl();
    const signal = control.signal;
    const raced = control.cutShort();
    const reason = new ConnectError("late", Code.DeadlineExceeded);
    control.abort(reason);
    expect(signal.reason).toBe(reason);
    await expect(raced).rejects.toBe(reason);
    await expect(control.cutShort()).rejects.toBe(reason);
  });

  it("arms deadlines, at once for none left; end() clears them and aborts a signal made with CALL_ENDED", () => {
    vi.useFakeTimers();
    const armed = new CallControl();
    armed.arm(50, () => "deadline");
    vi.advanceTimersByTime(49);
    expect(armed.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(armed.reason).toBe("deadline");

    const now = new CallControl();
    now.arm(0, () => "at once");
    expect(now.reason).toBe("at once");

    const ended = new CallControl();
    ended.arm(50, () => "too late");
    const signal = ended.signal;
    ended.end();
    vi.advanceTimersByTime(100);
    expect(signal.aborted).toBe(true);
    expect(ended.reason).not.toBe("too late");
    expect(clientGone(ended)).toBe(false);
    expect((ended.reason as ConnectError).code).toBe(Code.Canceled);
  });
});

describe("invokeInProcess", () => {
  const specs = unaryImplementationsOf((router) =>
    router.service(PingService, {
      ping(_req, ctx) {
        ctx.responseHeader.set("x-seen-by-method", ctx.requestHeader.get("x-order") ?? "");
        const mode = ctx.requestHeader.get("x-mode");
        if (mode === "fail") throw new Error("boom");
        if (mode === "signal") return { response: ctx.signal.aborted ? "aborted" : "live" };
        // A plain object: normalized to the output message.
        return { response: "pong" };
      },
    }),
  );
  const spec = [...specs.values()][0]!;
  const call = (mode = "", control = new CallControl()): InProcessCall => ({
    method: spec.method,
    protocolName: "test",
    requestMethod: "POST",
    url: "http://test/ping",
    control,
    requestHeader: new Headers({ "x-mode": mode }),
    contextValues: createContextValues(),
  });
  // Each interceptor notes its name on the way in, in a request header the method echoes.
  const noting =
    (name: string): Interceptor =>
    (next) =>
    (req) => {
      req.header.set("x-order", `${req.header.get("x-order") ?? ""}${name}`);
      expect(req.contextValues.get(callControlKey)).toBeInstanceOf(CallControl);
      return next(req);
    };

  it("runs the interceptors first to last around the method, and normalizes a plain answer", async () => {
    const result = await invokeInProcess(spec, call(), create(PingRequestSchema), [noting("a"), noting("b")]);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.output.$typeName).toBe(spec.method.output.typeName);
    expect((result.output as unknown as { response: string }).response).toBe("pong");
    expect(result.responseHeader.get("x-seen-by-method")).toBe("ab");
  });

  it("answers INTERNAL for anything but a ConnectError, and ends the call's control", async () => {
    const control = new CallControl();
    const result = await invokeInProcess(spec, call("fail", control), create(PingRequestSchema), []);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error.code).toBe(Code.Internal);
    expect(control.aborted).toBe(true);
    expect(clientGone(control)).toBe(false);
  });

  it("gives the method Connect's context: the call's fields, its remaining time, and the signal of the request it was handed", async () => {
    let seen: HandlerContext | undefined;
    let remaining: number | undefined;
    const contextSpec = unaryImplementationsOf((router) =>
      router.service(PingService, {
        ping(_req, ctx) {
          seen = ctx;
          remaining = ctx.timeoutMs();
          return { response: "pong" };
        },
      }),
    ).values().next().value!;
    const control = new CallControl();
    const values = createContextValues();
    const timed = { ...call("", control), contextValues: values, timeoutMs: 5_000 };
    const result = await invokeInProcess(contextSpec, timed, create(PingRequestSchema), []);
    expect(result.ok).toBe(true);
    expect(seen).toMatchObject({ service: PingService, method: contextSpec.method, protocolName: "test", requestMethod: "POST", url: "http://test/ping", values });
    expect(seen!.requestHeader.get("x-mode")).toBe("");
    expect(remaining).toBeGreaterThan(4_000);
    expect(remaining).toBeLessThanOrEqual(5_000);
    expect(seen!.signal.aborted).toBe(true); // the call has ended
    expect(seen!.timeoutMs()).toBeUndefined();

    // An interceptor that hands on a copy with a signal of its own: the method sees that signal.
    const own = new AbortController();
    const replacing: Interceptor = (next) => (req) => next({ ...req, signal: own.signal });
    await invokeInProcess(contextSpec, call(), create(PingRequestSchema), [replacing]);
    expect(seen!.signal).toBe(own.signal);
    expect(seen!.timeoutMs()).toBeUndefined();
  });

  it("gives the method a live signal while it runs", async () => {
    const result = await invokeInProcess(spec, call("signal"), create(PingRequestSchema), []);
    expect(result.ok && (result.output as unknown as { response: string }).response).toBe("live");
    // Through an interceptor that hands on a plain copy of the request (which has no signal of its own):
    // the call's signal.
    const copying: Interceptor = (next) => (req) => next({ ...req });
    const copied = await invokeInProcess(spec, call("signal"), create(PingRequestSchema), [copying]);
    expect(copied.ok && (copied.output as unknown as { response: string }).response).toBe("live");
  });
});
