// Limits on repeated failures from one caller (failed token exchanges; invite acceptances reuse it): a
// caller that keeps failing is refused with RESOURCE_EXHAUSTED and a RetryInfo saying when to try again,
// before any work (signature checks, discovery fetches, database reads) is done for it.
//
// A caller is known by two keys:
//   subject   the issuer and subject of its bearer token, when the token decodes.
//   address   the TCP peer of its connection, as the server recorded it (peer.ts), never a header.
// A request is refused when any of its keys is over its budget. A failure counts against the address
// always, and against the subject only when the token's signature verified before it was refused
// (provenCaller): anyone can write a token claiming someone else's issuer and subject, and were such
// tokens counted by the subject they claim, ten of them would lock that person's genuine tokens out for as
// long as the forger kept sending. A forger is counted by address; the subject budget limits what the
// holder of a genuine token can do wrong, from however many addresses. By address alone, one bad client
// behind a shared NAT or proxy would lock out the others sooner: the address budget is the larger one.
//
// Each key has a token bucket: `burst` failures at once, refilled at `perMinute`. Successes cost nothing.
// Counts live in this process: each replica limits what it sees, so N replicas behind a load balancer give
// a caller up to N times the budget. That still bounds guessing and verification floods to a fixed rate
// per replica; a shared store (the database) would cost a write per failure on every replica.
import type { HandlerContext } from "@connectrpc/connect";
import { decodeJwt } from "jose";
import { MAX_TOKEN_BYTES } from "./auth/authenticator.js";
import { resourceExhausted } from "./errors/index.js";
import { peerAddressOf } from "./peer.js";

export interface Budget {
  /** Failures allowed at once. */
  burst: number;
  /** How many failures' worth of budget comes back per minute. */
  perMinute: number;
}

export interface FailureBudgets {
  bySubject: Budget;
  byAddress: Budget;
}

/** The failure budgets of the server, one per kind of attempt limited. */
export interface RateLimits {
  /** Token exchanges refused as UNAUTHENTICATED. */
  exchangeFailures: FailureBudgets;
  /** Group invite acceptances refused (an invalid code, or a token refused). */
  inviteFailures: FailureBudgets;
}

/**
 * Per replica, for exchanges and invite acceptances alike (counted apart): a token subject may fail 10 at
 * once and then one every 6 s; a network address 100 at once and then 100 a minute (callers behind one NAT
 * or proxy share it).
 */
export const DEFAULT_RATE_LIMITS: RateLimits = {
  exchangeFailures: { bySubject: { burst: 10, perMinute: 10 }, byAddress: { burst: 100, perMinute: 100 } },
  inviteFailures: { bySubject: { burst: 10, perMinute: 10 }, byAddress: { burst: 100, perMinute: 100 } },
};

/** What a caller is known by (see the file comment). */
export interface Caller {
  subject?: string | undefined;
  address?: string | undefined;
}

export interface FailureLimiter {
  /** Throws RESOURCE_EXHAUSTED (with RetryInfo) when any of the caller's keys is over its budget. */
  check(caller: Caller): void;
  /** Counts one failure against each of the caller's keys. */
  failed(caller: Caller): void;
}

export interface FailureLimiterOptions extends FailureBudgets {
  /** What is limited, for the error message ("failed token exchanges"). */
  what: string;
  /** Keys remembered per kind at most (the least recently failed are forgotten first). Default 100,000. */
  maxKeys?: number;
  /** The clock (tests). */
  now?: () => number;
}

/** Longest issuer + subject counted by; a longer pair counts under the address only. */
const MAX_SUBJECT_KEY = 2048;

interface Bucket {
  tokens: number;
  at: number;
}

function createBuckets(budget: Budget, maxKeys: number, now: () => number) {
  const buckets = new Map<string, Bucket>();
  const perMs = budget.perMinute / 60_000;
  const refilled = (key: string): Bucket | undefined => {
    const b = buckets.get(key);
    if (!b) return undefined;
    const t = now();
    b.tokens = Math.min(budget.burst, b.tokens + (t - b.at) * perMs);
    b.at = t;
    if (b.tokens >= budget.burst) {
      buckets.delete(key); // full again: nothing to remember
      return undefined;
    }
    return b;
  };
  return {
    /** Milliseconds until the key may fail again, or 0 when it may now. */
    waitMs(key: string): number {
      const b = refilled(key);
      if (!b || b.tokens >= 1) return 0;
      return perMs > 0 ? Math.ceil((1 - b.tokens) / perMs) : Number.MAX_SAFE_INTEGER;
    },
    take(key: string): void {
      const b = refilled(key) ?? { tokens: budget.burst, at: now() };
      b.tokens = Math.max(0, b.tokens - 1);
      buckets.delete(key); // re-inserted last: the map's order is least recently failed first
      if (buckets.size >= maxKeys) buckets.delete(buckets.keys().next().value!);
      buckets.set(key, b);
    },
  };
}

export function createFailureLimiter(opts: FailureLimiterOptions): FailureLimiter {
  const now = opts.now ?? Date.now;
  const maxKeys = opts.maxKeys ?? 100_000;
  const subjects = createBuckets(opts.bySubject, maxKeys, now);
  const addresses = createBuckets(opts.byAddress, maxKeys, now);
  return {
    check(caller) {
      const wait = Math.max(caller.subject ? subjects.waitMs(caller.subject) : 0, caller.address ? addresses.waitMs(caller.address) : 0);
      if (wait > 0) {
        throw resourceExhausted(`Too many ${opts.what} from this caller; retry in ${Math.ceil(wait / 1000)} s`, wait, "TOO_MANY_FAILURES");
      }
    },
    failed(caller) {
      if (caller.subject) subjects.take(caller.subject);
      if (caller.address) addresses.take(caller.address);
    },
  };
}

/**
 * The caller as a failure counts it: under its token's subject only when `signatureVerified` (see the
 * file comment), else under its address alone.
 */
export function provenCaller(caller: Caller, signatureVerified: boolean): Caller {
  return signatureVerified ? caller : { address: caller.address };
}

/**
 * The caller of a request, from its bearer token (issuer and subject, unverified; none when the token does
 * not decode) and the connection's address.
 */
export function callerOf(ctx: Pick<HandlerContext, "values">, token: string | undefined): Caller {
  let subject: string | undefined;
  if (token !== undefined && token.length <= MAX_TOKEN_BYTES) {
    try {
      const { iss, sub } = decodeJwt(token);
      if (typeof iss === "string" && typeof sub === "string" && iss.length + sub.length <= MAX_SUBJECT_KEY) subject = JSON.stringify([iss, sub]);
    } catch {
      // Not a JWT: counted by address only.
    }
  }
  return { subject, address: peerAddressOf(ctx) };
}
