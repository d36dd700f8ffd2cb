import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { RetryInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { createPoolGate } from "../../src/db/pool-gate.js";
import { errorReasonOf } from "../../src/kernel/errors/index.js";

/** A piece of work that runs until released. */
function held() {
  let release!: () => void;
  const done = new Promise<void>((r) => (release = r));
  return { release, work: () => done };
}

describe("the pool gate", () => {
  it("runs as many at once as it has permits; one more waits, then fails UNAVAILABLE (DATABASE_BUSY) with RetryInfo", async () => {
    const gate = createPoolGate({ permits: 2, timeoutMs: 50 });
    const a = held();
    const b = held();
    const running = [gate.run(a.work), gate.run(b.work)];
    const err = await gate.run(async () => "ran").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.Unavailable);
    expect(errorReasonOf(err as ConnectError)).toBe("DATABASE_BUSY");
    expect((err as ConnectError).findDetails(RetryInfoSchema)).toHaveLength(1);
    a.release();
    b.release();
    await Promise.all(running);
  });

  it("a waiting run takes the first permit released, in order of arrival", async () => {
    const gate = createPoolGate({ permits: 1, timeoutMs: 10_000 });
    const a = held();
    const order: string[] = [];
    const first = gate.run(async () => {
      await a.work();
      order.push("a");
    });
    const second = gate.run(async () => order.push("b"));
    const third = gate.run(async () => order.push("c"));
    a.release();
    await Promise.all([first, second, third]);
    expect(order).toEqual(["a", "b", "c"]);
  });

  it("a failed run releases its permit", async () => {
    const gate = createPoolGate({ permits: 1, timeoutMs: 50 });
    await expect(gate.run(async () => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    await expect(gate.run(async () => "after")).resolves.toBe("after");
  });

  it("a run that timed out leaves no trace: the next permit goes to the next waiter", async () => {
    const gate = createPoolGate({ permits: 1, timeoutMs: 30 });
    const a = held();
    const first = gate.run(a.work);
    await expect(gate.run(async () => "late")).rejects.toBeInstanceOf(ConnectError);
    const next = gate.run(async () => "next");
    a.release();
    await first;
    await expect(next).resolves.toBe("next");
  });
});
