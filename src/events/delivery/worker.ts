// The delivery worker every server process runs: it expands committed events into their deliveries (one per
// matching subscription, in a transaction of its own: the writer's transaction only records the event), claims
// due deliveries (queue.ts), sends each as a signed CloudEvent (cloudevent.ts, sender.ts), and records the
// outcomes in batches.
//
// - Expanding. Each round first expands the oldest waiting events, up to 500 and no more once they make 2,000
//   deliveries (one event at least), so a transaction stays short at 1,000 subscriptions and a backlog of
//   events with few subscriptions expands in few transactions.
//   Replicas expand different events (SKIP LOCKED); a replica that dies mid-expansion leaves its events to the
//   next one.
// - At least once. A 2xx acknowledges; anything else (another status, a timeout, a refused connection) is
//   retried with exponential backoff and jitter (retryBaseMs doubling up to retryMaxMs, each delay drawn
//   from its upper half) until the delivery is retryForMs old (24 h by default), then marked failed and kept.
//   A process that dies mid-attempt leaves its claimed rows to the next claim once their lease ends.
// - Never stuck behind one sink. Each subscription may have at most perSubscription deliveries in flight in
//   a process (and as many more claimed, waiting their turn), a claim takes only its free room, and each
//   subscription sends over connections of its own (sender.ts), so a sink that hangs holds its own rows (each
//   attempt for at most timeoutMs) and connections and nothing else, even beside another subscription's sink
//   on the same host; the process
//   holds at most maxInFlight claimed rows in all.
// - Woken by the database (the outbox trigger notifies apiserver_events when an event some subscription
//   matches commits; an expansion that added deliveries notifies it too, so every replica helps send them),
//   when a busy sink is down to half its room, and every pollMs (retries falling due).
// - Settled rows are pruned: delivered ones after retentionMs, failed ones after failedRetentionMs, and
//   events no delivery refers to any more after retentionMs. The backlog (pending and due deliveries) is
//   logged at the same pace while there is one.
import { DEFAULT_DELIVERY_OPTIONS } from "../../config.js";
import type { KeyStore } from "../../kernel/auth/index.js";
import { log } from "../../kernel/log.js";
import type { RunningWorker } from "../../kernel/module.js";
import type { Executor } from "../../kernel/store.js";
import type { SinkPolicy } from "../sinks.js";
import { deliveryRequest } from "./cloudevent.js";
import { registerDeliveryMetrics } from "./metrics.js";
import { createDeliveryQueue, EVENTS_CHANNEL, type ClaimedDelivery, type Settlement } from "./queue.js";
import { createSender, type SendResult } from "./sender.js";

export interface DeliveryOptions {
  /** An attempt's limit, from connecting to the end of the answer (default 10 s). */
  timeoutMs: number;
  /** How long a delivery is retried, from its event's commit (default 24 h). */
  retryForMs: number;
  /** The first retry's delay (default 1 s), doubling with each attempt up to retryMaxMs (default 1 h). */
  retryBaseMs: number;
  retryMaxMs: number;
  /** Deliveries one subscription may have in flight in this process (default 32). */
  perSubscription: number;
  /** Deliveries claimed by this process at once, sending or waiting their turn (default 1024). */
  maxInFlight: number;
  /** How often due retries are looked for when nothing wakes the worker (default 1 s). */
  pollMs: number;
  /** How long delivered rows (and events no delivery refers to) are kept (default 3 days). */
  retentionMs: number;
  /** How long failed deliveries are kept for inspection (default 30 days). */
  failedRetentionMs: number;
  /** How often pruning runs (default 1 minute). */
  pruneEveryMs: number;
}

/** An expansion takes at most this many events, and no more once they make this many deliveries. */
const EXPANSION_EVENTS = 500;
const EXPANSION_DELIVERIES = 2_000;
/** Expansion runs at least this often even when no notification says an event is waiting. */
const EXPANSION_SWEEP_MS = 1_000;
/** Outcomes are written at least this often, and at once when this many are waiting. */
const SETTLE_DELAY_MS = 5;
const SETTLE_BATCH = 500;
const PRUNE_BATCH = 5_000;
const PRUNE_ROUNDS = 20;

/** Counts since the process started (the metrics of the operators' issue read them). */
export interface DeliveryStats {
  /** Events expanded into their deliveries, and the deliveries added. */
  expandedEvents: number;
  expandedDeliveries: number;
  /** Attempts made (each sends the event once). */
  attempts: number;
  delivered: number;
  /** Attempts that failed and will be retried. */
  retried: number;
  /** Deliveries given up after retrying for retryForMs. */
  failed: number;
  inFlight: number;
  claims: number;
}

export interface DeliveryWorkerDeps {
  db: Executor;
  keys: KeyStore;
  /** This server's issuer URL: the tokens' `iss` and the start of every ce-source. */
  issuer: string;
  sinks: SinkPolicy;
  /** Database notifications (Database.listen); without it the worker polls only. */
  listen?: (channel: string, onNotify: (payload: string) => void, onReady: () => void) => Promise<() => Promise<void>>;
  options?: Partial<DeliveryOptions>;
}

export interface DeliveryWorker extends RunningWorker {
  stats: Readonly<DeliveryStats>;
  /** Pending deliveries, and how many are due now. */
  depth(): Promise<{ pending: number; due: number }>;
  /** Claims again now (for example after events were inserted without a notification). */
  wake(): void;
  /**
   * Stops claiming, lets attempts in flight finish for up to graceMs (then cuts them off: they are retried),
   * and writes every outcome.
   */
  stop(graceMs?: number): Promise<void>;
}

/** The delay before attempt `attempt + 1`: exponential, capped, from the upper half of its range. */
export function retryDelayMs(attempt: number, opts: Pick<DeliveryOptions, "retryBaseMs" | "retryMaxMs">, random = Math.random): number {
  const ceiling = Math.min(opts.retryMaxMs, opts.retryBaseMs * 2 ** Math.min(Math.max(attempt - 1, 0), 40));
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}

export async function startDeliveryWorker(deps: DeliveryWorkerDeps): Promise<DeliveryWorker> {
  const opts: DeliveryOptions = { ...DEFAULT_DELIVERY_OPTIONS, ...deps.options };
  const queue = createDeliveryQueue(deps.db);
  const sender = createSender({ policy: deps.sinks, timeoutMs: opts.timeoutMs, maxSocketsPerSubscription: opts.perSubscription });
  // A claim holds its rows past the attempt's end, with room for a slow settle; a process that died holding
  // them gives them up when the lease ends (an outcome recorded after that is ignored: see queue.ts).
  const leaseMs = opts.timeoutMs * 3;
  const stats: DeliveryStats = { expandedEvents: 0, expandedDeliveries: 0, attempts: 0, delivered: 0, retried: 0, failed: 0, inFlight: 0, claims: 0 };
  const inFlight = new Set<Promise<void>>();
  let stopped = false;

  // Waking: a flag, so a wake between two sleeps is not lost.
  let woken = false;
  let wakeUp: (() => void) | undefined;
  const wake = () => {
    woken = true;
    wakeUp?.();
  };
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      if (woken || stopped) return resolve();
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        wakeUp = undefined;
        resolve();
      }
      wakeUp = done;
    });

  // Outcomes, written in batches, one batch at a time. A batch the database refuses is tried again; once its
  // rows' leases have ended it is dropped (the deliveries are then attempted again: at least once).
  const outcomes: { settlement: Settlement; at: number }[] = [];
  let settleTimer: NodeJS.Timeout | undefined;
  let settling: Promise<void> = Promise.resolve();
  const settleNow = (): Promise<void> => {
    clearTimeout(settleTimer);
    settleTimer = undefined;
    settling = settling.then(async () => {
      const batch = outcomes.splice(0, outcomes.length);
      if (batch.length === 0) return;
      try {
        await queue.settle(batch.map((o) => o.settlement));
      } catch (err) {
        const now = Date.now();
        const kept = batch.filter((o) => now - o.at < leaseMs);
        log.warn("events: cannot record delivery outcomes; retrying", { err, outcomes: batch.length, kept: kept.length });
        outcomes.unshift(...kept);
        if (!stopped) settleTimer ??= setTimeout(settleNow, 1_000);
      }
    });
    return settling;
  };
  const record = (settlement: Settlement) => {
    outcomes.push({ settlement, at: Date.now() });
    if (outcomes.length >= SETTLE_BATCH) void settleNow();
    else settleTimer ??= setTimeout(settleNow, SETTLE_DELAY_MS);
  };

  function outcomeOf(d: ClaimedDelivery, result: SendResult): Settlement {
    const keys = { eventId: d.eventId, subscriptionUid: d.subscriptionUid };
    if (result.ok) {
      stats.delivered++;
      log.debug("events: delivered", { ...keys, attempt: d.attempt, status: result.status });
      return { outcome: "delivered", ...keys, status: result.status };
    }
    const now = Date.now();
    if (now - d.createTime.getTime() >= opts.retryForMs) {
      stats.failed++;
      log.warn("events: delivery failed; giving up", { ...keys, sink: d.sink, attempts: d.attempt, error: result.error });
      return { outcome: "failed", ...keys, attempt: d.attempt, status: result.status, error: result.error, next: new Date(now) };
    }
    stats.retried++;
    const next = new Date(now + retryDelayMs(d.attempt, opts));
    log.info("events: delivery failed; will retry", { ...keys, sink: d.sink, attempt: d.attempt, error: result.error, next: next.toISOString() });
    return { outcome: "retry", ...keys, attempt: d.attempt, status: result.status, error: result.error, next };
  }

  async function attempt(d: ClaimedDelivery): Promise<void> {
    let result: SendResult;
    try {
      result = await sender.send(d.sink, await deliveryRequest(d, { issuer: deps.issuer, keys: deps.keys }), d.subscriptionUid);
    } catch (err) {
      result = { ok: false, status: null, error: `not sent: ${(err as Error).message}` };
    }
    stats.attempts++;
    record(outcomeOf(d, result));
  }

  // Each subscription holds up to twice its concurrency in claimed rows: perSubscription sending, the rest
  // waiting their turn, so the next claim is made while the sink is kept busy (a waiting row starts within
  // one attempt's timeout, well inside its lease). A claim is made again once a subscription's held rows
  // fall to half of that window.
  const window = opts.perSubscription * 2;
  const held = new Map<string, number>();
  const sending = new Map<string, number>();
  const waiting = new Map<string, ClaimedDelivery[]>();
  let heldTotal = 0;

  function send(d: ClaimedDelivery): void {
    const uid = d.subscriptionUid;
    sending.set(uid, (sending.get(uid) ?? 0) + 1);
    stats.inFlight++;
    const p: Promise<void> = attempt(d).finally(() => {
      inFlight.delete(p);
      stats.inFlight--;
      sending.set(uid, sending.get(uid)! - 1);
      const n = held.get(uid)! - 1;
      heldTotal--;
      if (n === 0) {
        held.delete(uid);
        sending.delete(uid);
      } else held.set(uid, n);
      const next = waiting.get(uid)?.shift();
      if (next && !stopped) send(next);
      if (n === opts.perSubscription || heldTotal === Math.floor(opts.maxInFlight / 2)) wake();
    });
    inFlight.add(p);
  }

  function start(d: ClaimedDelivery): void {
    const uid = d.subscriptionUid;
    held.set(uid, (held.get(uid) ?? 0) + 1);
    heldTotal++;
    if ((sending.get(uid) ?? 0) < opts.perSubscription) return send(d);
    let line = waiting.get(uid);
    if (!line) waiting.set(uid, (line = []));
    line.push(d);
  }

  // An event to expand comes with a notification (the outbox trigger's), so expansion runs when one came (or
  // the listening connection was made again), while the last one found more, and every EXPANSION_SWEEP_MS in
  // case a notification was lost; without notifications, every round.
  let expansionDue = true;
  let lastExpansion = 0;
  /** Expands one batch of waiting events when one may be waiting; whether more may be. */
  async function expand(): Promise<boolean> {
    if (!expansionDue && deps.listen && Date.now() - lastExpansion < EXPANSION_SWEEP_MS) return false;
    expansionDue = false;
    lastExpansion = Date.now();
    let r: { events: number; deliveries: number; more: boolean };
    try {
      r = await queue.expand({ events: EXPANSION_EVENTS, deliveries: EXPANSION_DELIVERIES });
    } catch (err) {
      expansionDue = true;
      throw err;
    }
    stats.expandedEvents += r.events;
    stats.expandedDeliveries += r.deliveries;
    if (r.more) expansionDue = true;
    return r.more;
  }
  const notified = () => {
    expansionDue = true;
    wake();
  };

  async function run(): Promise<void> {
    let errorDelay = 0;
    while (!stopped) {
      woken = false;
      let more: boolean;
      try {
        more = await expand();
      } catch (err) {
        errorDelay = Math.min(Math.max(errorDelay * 2, 250), 5_000);
        log.warn("events: cannot expand events into deliveries; retrying", { err, retryMs: errorDelay });
        await new Promise((r) => setTimeout(r, errorDelay));
        continue;
      }
      const free = opts.maxInFlight - heldTotal;
      if (free <= 0) {
        if (!more) await sleep(opts.pollMs);
        continue;
      }
      let claimed: ClaimedDelivery[];
      try {
        claimed = await queue.claim({ perSubscription: window, busy: held, limit: free, leaseMs });
        errorDelay = 0;
      } catch (err) {
        errorDelay = Math.min(Math.max(errorDelay * 2, 250), 5_000);
        log.warn("events: cannot claim deliveries; retrying", { err, retryMs: errorDelay });
        await new Promise((r) => setTimeout(r, errorDelay));
        continue;
      }
      stats.claims++;
      if (stopped) {
        // Claimed while stopping: given back, due at once for another process (or the next start).
        await queue.release(claimed).catch((err: unknown) => log.warn("events: cannot release claimed deliveries; they are due when their lease ends", { err }));
        break;
      }
      for (const d of claimed) start(d);
      if (claimed.length === 0 && !more) await sleep(opts.pollMs);
    }
  }

  async function prune(): Promise<void> {
    try {
      let total = { deliveries: 0, events: 0 };
      for (let round = 0; round < PRUNE_ROUNDS && !stopped; round++) {
        const r = await queue.prune({ deliveredMs: opts.retentionMs, failedMs: opts.failedRetentionMs, batch: PRUNE_BATCH });
        total = { deliveries: total.deliveries + r.deliveries, events: total.events + r.events };
        if (r.deliveries < PRUNE_BATCH && r.events < PRUNE_BATCH) break;
      }
      if (total.deliveries + total.events > 0) log.info("events: pruned settled deliveries and old events", total);
      // The backlog, once a pruning period, while there is one.
      const depth = await queue.depth();
      if (depth.pending > 0) log.info("events: delivery backlog", { ...depth, inFlight: stats.inFlight });
    } catch (err) {
      log.warn("events: pruning failed; will try again", { err });
    }
  }

  const unlisten = deps.listen ? await deps.listen(EVENTS_CHANNEL, notified, notified) : undefined;
  const running = run().catch((err: unknown) => log.error("events: delivery worker stopped", { err }));
  let pruning: Promise<void> = Promise.resolve();
  const pruneTimer = setInterval(() => {
    pruning = pruning.then(prune);
  }, opts.pruneEveryMs);
  pruneTimer.unref();

  const depth = () => queue.depth();
  return {
    stats,
    depth,
    wake,
    observe: (registry) => registerDeliveryMetrics(registry, { stats, depth }),
    async stop(graceMs = opts.timeoutMs) {
      if (stopped) return;
      stopped = true;
      clearInterval(pruneTimer);
      wake();
      await running;
      await unlisten?.().catch(() => {});
      let graceTimer: NodeJS.Timeout | undefined;
      // Rows claimed but not yet sent are given back, due at once for another process.
      const unsent = [...waiting.values()].flat();
      waiting.clear();
      await queue.release(unsent).catch((err: unknown) => log.warn("events: cannot release claimed deliveries; they are due when their lease ends", { err }));
      const graceOver = new Promise<void>((resolve) => (graceTimer = setTimeout(resolve, graceMs)));
      await Promise.race([Promise.allSettled([...inFlight]), graceOver]);
      clearTimeout(graceTimer);
      sender.close(); // attempts still running fail now, and are retried
      await Promise.allSettled([...inFlight]);
      await pruning;
      await settleNow();
    },
  };
}
