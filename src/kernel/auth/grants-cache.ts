// What each caller is granted (its home group and role bindings), remembered between requests so an
// authenticated call does not have to read them every time.
//
// Freshness: every statement that can change a grant (a role binding created, changed or deleted, a role's
// capabilities changed or the role deleted, an identity deleted or moved) notifies the database channel
// GRANTS_CHANNEL (triggers, drizzle/0005), delivered at commit to every server listening; each server then
// forgets everything it remembered. This server's own changes also clear it synchronously, before their
// response is sent (see the auth interceptor), so a caller that deletes a binding and calls again is never
// answered from the old grants. Two more guards:
//   - an entry is kept at most `ttlMs` (10 s), bounding what a lost notification could leave behind (the
//     listening connection dropped: nothing is remembered until it is re-established, db/client.ts);
//   - a read that started before a clear is not remembered (a generation count), so a read racing a change
//     cannot put the old grants back;
//   - an identity's grants are read once at a time: calls arriving while a read is under way (many calls of
//     one caller when its entry expires) share it, unless a grant changed since it started.
// Without a subscription (listening failed), nothing is remembered: every request reads its grants.
import { log } from "../log.js";
import type { IdentityGrants } from "./types.js";

/** The channel the grant triggers notify. */
export const GRANTS_CHANNEL = "apiserver_grants";
export const DEFAULT_GRANTS_TTL_MS = 10_000;
const DEFAULT_MAX_ENTRIES = 10_000;

export type Subscribe = (
  channel: string,
  onNotify: (payload: string) => void,
  onReady: () => void,
  onLost?: () => void,
) => Promise<() => Promise<void>>;

export interface GrantsCacheOptions {
  /** Reads an identity's grants (IdentityDirectory.grants); undefined when the identity does not exist. */
  load: (identityUid: string) => Promise<IdentityGrants | undefined>;
  /** The database's notification subscription (Database.listen). Without one, nothing is remembered. */
  subscribe?: Subscribe;
  ttlMs?: number;
  maxEntries?: number;
  /** Clock, epoch milliseconds. Default Date.now. */
  now?: () => number;
}

export interface GrantsCache {
  /** The identity's grants, remembered or read. Undefined (never remembered) when it does not exist. */
  get(identityUid: string): Promise<IdentityGrants | undefined>;
  /** Forgets everything: a grant may have changed. */
  clear(): void;
  /** Stops listening. */
  close(): Promise<void>;
}

/** Starts listening at once; entries are remembered from the moment the subscription is established. */
export function createGrantsCache(opts: GrantsCacheOptions): GrantsCache {
  const ttl = opts.ttlMs ?? DEFAULT_GRANTS_TTL_MS;
  const max = opts.maxEntries ?? DEFAULT_MAX_ENTRIES;
  const now = opts.now ?? Date.now;
  const entries = new Map<string, { grants: IdentityGrants; expires: number }>();
  /** The reads under way, by identity, with the generation each started in. */
  const reading = new Map<string, { grants: Promise<IdentityGrants | undefined>; generation: number }>();
  let generation = 0;
  let listening = false;

  const clear = () => {
    generation++;
    entries.clear();
    reading.clear();
  };

  const subscription = opts.subscribe
    ?.(
      GRANTS_CHANNEL,
      clear,
      () => {
        clear();
        listening = true;
      },
      () => {
        // Changes are not heard until the subscription is back (onReady): remember nothing meanwhile.
        listening = false;
        clear();
      },
    )
    .catch((err: unknown) => {
      log.warn("grants: cannot listen for changes; reading them on every request", { err });
      return undefined;
    });

  return {
    get(identityUid) {
      const hit = entries.get(identityUid);
      if (hit && hit.expires > now()) return Promise.resolve(hit.grants);
      // One read per identity at a time: a call arriving while one is under way waits for it, unless a
      // grant changed since it started (the generation moved: clear() also forgets it).
      const pending = reading.get(identityUid);
      if (pending && listening && pending.generation === generation) return pending.grants;
      const started = generation;
      const read = opts.load(identityUid).then((grants) => {
        if (grants && listening && started === generation && ttl > 0) {
          entries.delete(identityUid);
          if (entries.size >= max) entries.delete(entries.keys().next().value!);
          entries.set(identityUid, { grants, expires: now() + ttl });
        }
        return grants;
      });
      const entry = { grants: read, generation: started };
      reading.set(identityUid, entry);
      const done = () => {
        if (reading.get(identityUid) === entry) reading.delete(identityUid);
      };
      read.then(done, done);
      return read;
    },
    clear,
    async close() {
      const unsubscribe = await subscription;
      listening = false;
      clear();
      await unsubscribe?.();
    },
  };
}
