// The failure limiter (kernel/rate-limit.ts) on a clock the test moves: burst, refill, RetryInfo, every key
// counted and any key refusing, and how a caller is known (token subject, connection address).
import { Code, ConnectError, createContextValues } from "@connectrpc/connect";
import { base64url } from "jose";
import { describe, expect, it } from "vitest";
import { RetryInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { peerAddressKey, peerContextValues } from "../../src/kernel/peer.js";
import { callerOf, createFailureLimiter, provenCaller, type Caller, type FailureLimiter } from "../../src/kernel/rate-limit.js";

function setup(bySubject = { burst: 3, perMinute: 6 }, byAddress = { burst: 5, perMinute: 60 }, maxKeys?: number) {
  const clock = { t: 1_000_000 };
  const limiter = createFailureLimiter({ what: "failed token exchanges", bySubject, byAddress, now: () => clock.t, ...(maxKeys ? { maxKeys } : {}) });
  return { clock, limiter };
}

/** The RetryInfo delay (ms) of the refusal, or undefined when the caller may go on. */
function refusal(limiter: FailureLimiter, caller: Caller): number | undefined {
  try {
    limiter.check(caller);
    return undefined;
  } catch (err) {
    expect(err).toBeInstanceOf(ConnectError);
    const e = err as ConnectError;
    expect(e.code).toBe(Code.ResourceExhausted);
    const retry = e.findDetails(RetryInfoSchema)[0]!;
    return Number(retry.retryDelay!.seconds) * 1000 + retry.retryDelay!.nanos / 1e6;
  }
}

const fail = (limiter: FailureLimiter, caller: Caller, n: number) => {
  for (let i = 0; i < n; i++) limiter.failed(caller);
};

describe("createFailureLimiter", () => {
  it("lets a burst of failures through, then refuses with RetryInfo until the budget refills", () => {
    const { clock, limiter } = setup();
    const alice = { subject: "alice" };
    fail(limiter, alice, 2);
    expect(refusal(limiter, alice)).toBeUndefined();
    fail(limiter, alice, 1);
    expect(refusal(limiter, alice)).toBe(10_000); // 6 per minute: one failure's worth every 10 s
    clock.t += 9_999;
    expect(refusal(limiter, alice)).toBe(1);
    clock.t += 1;
    expect(refusal(limiter, alice)).toBeUndefined();
    fail(limiter, alice, 1);
    expect(refusal(limiter, alice)).toBe(10_000);
  });

  it("counts each subject and address apart, and refuses when any of the caller's keys is over", () => {
    const { limiter } = setup();
    fail(limiter, { subject: "alice", address: "10.0.0.1" }, 3);
    expect(refusal(limiter, { subject: "alice", address: "10.0.0.2" })).toBeGreaterThan(0); // same subject, elsewhere
    expect(refusal(limiter, { subject: "bob", address: "10.0.0.1" })).toBeUndefined(); // address: 3 of 5
    // A forger changing `sub` on every try is still counted by address.
    fail(limiter, { subject: "mallory-1", address: "10.0.0.1" }, 1);
    fail(limiter, { subject: "mallory-2", address: "10.0.0.1" }, 1);
    expect(refusal(limiter, { subject: "mallory-3", address: "10.0.0.1" })).toBe(1_000);
    expect(refusal(limiter, { address: "10.0.0.1" })).toBe(1_000);
    expect(refusal(limiter, { subject: "bob", address: "10.0.0.3" })).toBeUndefined();
  });

  it("counts a failure by subject only when the token's signature verified (provenCaller)", () => {
    const { limiter } = setup();
    const forger = { subject: "alice", address: "10.0.0.9" };
    for (let i = 0; i < 4; i++) limiter.failed(provenCaller(forger, false));
    expect(refusal(limiter, { subject: "alice", address: "10.0.0.1" })).toBeUndefined(); // alice elsewhere: untouched
    expect(refusal(limiter, { address: "10.0.0.9" })).toBeUndefined(); // 4 of the address's 5
    limiter.failed(provenCaller(forger, false));
    expect(refusal(limiter, { address: "10.0.0.9" })).toBeGreaterThan(0);
    fail(limiter, provenCaller({ subject: "alice", address: "10.0.0.1" }, true), 3);
    expect(refusal(limiter, { subject: "alice", address: "10.0.0.2" })).toBeGreaterThan(0);
  });

  it("forgets the least recently failed keys beyond its size", () => {
    const { limiter } = setup(undefined, undefined, 2);
    fail(limiter, { subject: "a" }, 3);
    fail(limiter, { subject: "b" }, 3);
    fail(limiter, { subject: "c" }, 3);
    expect(refusal(limiter, { subject: "a" })).toBeUndefined();
    expect(refusal(limiter, { subject: "b" })).toBeGreaterThan(0);
    expect(refusal(limiter, { subject: "c" })).toBeGreaterThan(0);
  });
});

describe("callerOf: what a caller is known by", () => {
  const ctxWith = (address?: string) => {
    const values = createContextValues();
    if (address) values.set(peerAddressKey, address);
    return { values };
  };
  const jwt = (payload: object) => `${base64url.encode(JSON.stringify({ alg: "RS256" }))}.${base64url.encode(JSON.stringify(payload))}.sig`;

  it("the token's issuer and subject (unverified) and the connection's address", () => {
    expect(callerOf(ctxWith("10.0.0.1"), jwt({ iss: "https://idp", sub: "alice" }))).toEqual({ subject: '["https://idp","alice"]', address: "10.0.0.1" });
    expect(callerOf(ctxWith("10.0.0.1"), "garbage")).toEqual({ subject: undefined, address: "10.0.0.1" });
    expect(callerOf(ctxWith(), jwt({ sub: "alice" }))).toEqual({ subject: undefined, address: undefined });
    expect(callerOf(ctxWith("::1"), undefined)).toEqual({ subject: undefined, address: "::1" });
  });

  it("takes the address from the socket the server accepted, not from what a client could send", () => {
    const values = peerContextValues({ socket: { remoteAddress: "192.0.2.7" } });
    expect(callerOf({ values }, undefined).address).toBe("192.0.2.7");
    expect(callerOf({ values: peerContextValues({ socket: null }) }, undefined).address).toBeUndefined();
  });
});
