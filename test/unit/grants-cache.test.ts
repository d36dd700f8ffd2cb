// The grants cache on its own: a fake subscription and loader, a fake clock.
import { describe, expect, it, vi } from "vitest";
import type { IdentityGrants } from "../../src/kernel/auth/types.js";
import { GRANTS_CHANNEL, createGrantsCache, type Subscribe } from "../../src/kernel/auth/grants-cache.js";
import { setLogLevel } from "../../src/kernel/log.js";

setLogLevel("silent");

const grants = (group: string): IdentityGrants => ({ homeGroup: undefined, bindings: [{ groupUid: group, capabilities: [1] }] });

/** A controllable subscription: `notify()` delivers a notification, `ready()` (re)establishes it. */
function fakeChannel(opts: { fail?: boolean } = {}) {
  const state: { onNotify?: (p: string) => void; onReady?: () => void; onLost?: () => void; channel?: string; unsubscribed: boolean } = {
    unsubscribed: false,
  };
  const subscribe: Subscribe = async (channel, onNotify, onReady, onLost) => {
    if (opts.fail) throw new Error("no LISTEN here");
    Object.assign(state, { channel, onNotify, onReady, onLost });
    onReady();
    return async () => void (state.unsubscribed = true);
  };
  return { subscribe, state, notify: () => state.onNotify!("role_bindings"), ready: () => state.onReady!(), lose: () => state.onLost!() };
}

/** A loader whose answers the test controls; counts reads. */
function fakeLoader() {
  let current = grants("g1");
  const load = vi.fn(async (uid: string) => (uid === "missing" ? undefined : current));
  return { load, set: (g: IdentityGrants) => (current = g) };
}

const settle = () => new Promise((r) => setImmediate(r));

describe("grants cache", () => {
  it("listens on the grants channel and remembers a read until a notification clears it", async () => {
    const ch = fakeChannel();
    const db = fakeLoader();
    const cache = createGrantsCache({ load: db.load, subscribe: ch.subscribe });
    await settle();
    expect(ch.state.channel).toBe(GRANTS_CHANNEL);
    expect(await cache.get("a")).toEqual(grants("g1"));
    expect(await cache.get("a")).toEqual(grants("g1"));
    expect(db.load).toHaveBeenCalledTimes(1);

    db.set(grants("g2"));
    ch.notify();
    expect(await cache.get("a")).toEqual(grants("g2"));
    expect(db.load).toHaveBeenCalledTimes(2);
  });

  it("remembers nothing while the subscription is lost, and again once it is back", async () => {
    const ch = fakeChannel();
    const db = fakeLoader();
    const cache = createGrantsCache({ load: db.load, subscribe: ch.subscribe });
    await settle();
    await cache.get("a");
    ch.lose();
    await cache.get("a");
    await cache.get("a");
    expect(db.load).toHaveBeenCalledTimes(3);
    ch.ready();
    await cache.get("a");
    await cache.get("a");
    expect(db.load).toHaveBeenCalledTimes(4);
  });

  it("clear() forgets at once (this server's own changes)", async () => {
    const ch = fakeChannel();
    const db = fakeLoader();
    const cache = createGrantsCache({ load: db.load, subscribe: ch.subscribe });
    await settle();
    await cache.get("a");
    db.set(grants("g2"));
    cache.clear();
    expect(await cache.get("a")).toEqual(grants("g2"));
  });

  it("an entry lives at most ttlMs", async () => {
    let now = 1_000_000;
    const ch = fakeChannel();
    const db = fakeLoader();
    const cache = createGrantsCache({ load: db.load, subscribe: ch.subscribe, ttlMs: 10_000, now: () => now });
    await settle();
    await cache.get("a");
    now += 9_999;
    await cache.get("a");
    expect(db.load).toHaveBeenCalledTimes(1);
    now += 2;
    await cache.get("a");
    expect(db.load).toHaveBeenCalledTimes(2);
  });

  it("a read that started before a change is not remembered", async () => {
    const ch = fakeChannel();
    let release!: (g: IdentityGrants) => void;
    const load = vi.fn((): Promise<IdentityGrants> => new Promise((r) => (release = r)));
    const cache = createGrantsCache({ load, subscribe: ch.subscribe });
    await settle();
    const pending = cache.get("a");
    ch.notify(); // the binding changed while the old grants were being read
    release(grants("old"));
    expect(await pending).toEqual(grants("old")); // that request saw the database as it was
    const next = cache.get("a");
    expect(load).toHaveBeenCalledTimes(2); // ...but the old answer was not kept for the next one
    release(grants("new"));
    expect(await next).toEqual(grants("new"));
  });

  it("a missing identity is never remembered", async () => {
    const ch = fakeChannel();
    const db = fakeLoader();
    const cache = createGrantsCache({ load: db.load, subscribe: ch.subscribe });
    await settle();
    expect(await cache.get("missing")).toBeUndefined();
    expect(await cache.get("missing")).toBeUndefined();
    expect(db.load).toHaveBeenCalledTimes(2);
  });

  it("a re-established subscription forgets everything (notifications may have been lost meanwhile)", async () => {
    const ch = fakeChannel();
    const db = fakeLoader();
    const cache = createGrantsCache({ load: db.load, subscribe: ch.subscribe });
    await settle();
    await cache.get("a");
    ch.ready();
    await cache.get("a");
    expect(db.load).toHaveBeenCalledTimes(2);
  });

  it("remembers nothing before the subscription is established, or when there is none, or when it fails", async () => {
    for (const subscribe of [undefined, fakeChannel({ fail: true }).subscribe]) {
      const db = fakeLoader();
      const cache = createGrantsCache({ load: db.load, ...(subscribe ? { subscribe } : {}) });
      await settle();
      await cache.get("a");
      await cache.get("a");
      expect(db.load).toHaveBeenCalledTimes(2);
      await cache.close();
    }
    // a subscription still pending
    const db = fakeLoader();
    const cache = createGrantsCache({ load: db.load, subscribe: () => new Promise(() => {}) });
    await cache.get("a");
    await cache.get("a");
    expect(db.load).toHaveBeenCalledTimes(2);
  });

  it("holds at most maxEntries, dropping the oldest", async () => {
    const ch = fakeChannel();
    const db = fakeLoader();
    const cache = createGrantsCache({ load: db.load, subscribe: ch.subscribe, maxEntries: 2 });
    await settle();
    await cache.get("a");
    await cache.get("b");
    await cache.get("c"); // drops a
    expect(db.load).toHaveBeenCalledTimes(3);
    await cache.get("b");
    await cache.get("c");
    expect(db.load).toHaveBeenCalledTimes(3);
    await cache.get("a");
    expect(db.load).toHaveBeenCalledTimes(4);
  });

  it("close() unsubscribes and stops remembering", async () => {
    const ch = fakeChannel();
    const db = fakeLoader();
    const cache = createGrantsCache({ load: db.load, subscribe: ch.subscribe });
    await settle();
    await cache.close();
    expect(ch.state.unsubscribed).toBe(true);
    await cache.get("a");
    await cache.get("a");
    expect(db.load).toHaveBeenCalledTimes(2);
  });

  it("reads an identity's grants once for calls arriving while a read is under way", async () => {
    let now = 1_000_000;
    const ch = fakeChannel();
    const gate = deferred();
    const load = vi.fn(async (uid: string) => {
      await gate.promise;
      return grants(`g-${uid}`);
    });
    const cache = createGrantsCache({ load, subscribe: ch.subscribe, ttlMs: 10_000, now: () => now });
    await settle();
    const first = Array.from({ length: 8 }, () => cache.get("a"));
    const other = cache.get("b");
    gate.resolve();
    expect(await Promise.all(first)).toEqual(Array.from({ length: 8 }, () => grants("g-a")));
    expect(await other).toEqual(grants("g-b"));
    expect(load.mock.calls.map((c) => c[0]).sort()).toEqual(["a", "b"]);

    // At expiry, the same: one read for all the calls of that moment.
    now += 10_001;
    const again = deferred();
    load.mockImplementation(async (uid: string) => {
      await again.promise;
      return grants(`g2-${uid}`);
    });
    const expired = Array.from({ length: 7 }, () => cache.get("a"));
    again.resolve();
    expect(await Promise.all(expired)).toEqual(Array.from({ length: 7 }, () => grants("g2-a")));
    expect(load).toHaveBeenCalledTimes(3);
  });

  it("a call arriving after a change does not wait for a read that started before it", async () => {
    const ch = fakeChannel();
    const db = fakeLoader();
    const gate = deferred();
    const load = vi.fn(async (uid: string) => {
      const answer = await db.load(uid);
      await gate.promise;
      return answer;
    });
    const cache = createGrantsCache({ load, subscribe: ch.subscribe });
    await settle();
    const before = cache.get("a"); // reads g1, answers later
    await settle();
    db.set(grants("g2"));
    ch.notify();
    const after = cache.get("a");
    gate.resolve();
    expect(await before).toEqual(grants("g1"));
    expect(await after).toEqual(grants("g2"));
    expect(load).toHaveBeenCalledTimes(2);
    // The read of the old grants was not remembered; the new one was.
    expect(await cache.get("a")).toEqual(grants("g2"));
    expect(load).toHaveBeenCalledTimes(2);
  });

  it("a failed read fails the calls sharing it, and the next call reads again", async () => {
    const ch = fakeChannel();
    const gate = deferred();
    let fail = true;
    const load = vi.fn(async () => {
      await gate.promise;
      if (fail) throw new Error("connection lost");
      return grants("g1");
    });
    const cache = createGrantsCache({ load, subscribe: ch.subscribe });
    await settle();
    const calls = [cache.get("a"), cache.get("a")];
    gate.resolve();
    for (const c of calls) await expect(c).rejects.toThrow("connection lost");
    expect(load).toHaveBeenCalledTimes(1);
    fail = false;
    expect(await cache.get("a")).toEqual(grants("g1"));
    expect(load).toHaveBeenCalledTimes(2);
  });
});

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}
