// Whether the database answers, for the health checks: /healthz probes it on each request, and the gRPC
// health status of the whole server ("") follows it, probed every `intervalMs`, so load balancers take a
// replica that cannot reach its database out of rotation, and put it back when the database returns. Each
// probe is bounded by `timeoutMs`: an unreachable database is NOT_SERVING at once, never a hanging probe.
import { log } from "../kernel/log.js";

export interface DatabaseHealthOptions {
  /** A trivial query (select 1). */
  probe: () => Promise<unknown>;
  /** Called with each change of reachability (and with the first probe's result). */
  onChange: (reachable: boolean) => void;
  /** Probe periodically (0: only when check() is called). */
  intervalMs: number;
  timeoutMs: number;
}

export interface DatabaseHealth {
  /** Probes now; true when the database answered within the timeout. */
  check(): Promise<boolean>;
  /** Stops the periodic probe. */
  close(): void;
}

export function watchDatabase(opts: DatabaseHealthOptions): DatabaseHealth {
  let reachable: boolean | undefined;
  const record = (ok: boolean, err?: unknown): boolean => {
    if (ok !== reachable) {
      if (ok) log.info("database reachable");
      else log.warn("database unreachable", { err });
      reachable = ok;
      opts.onChange(ok);
    }
    return ok;
  };
  const check = async (): Promise<boolean> => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${opts.timeoutMs} ms`)), opts.timeoutMs);
    });
    try {
      await Promise.race([opts.probe(), timeout]);
      return record(true);
    } catch (err) {
      return record(false, err);
    } finally {
      clearTimeout(timer);
    }
  };

  let running = false;
  const interval =
    opts.intervalMs > 0
      ? setInterval(() => {
          if (running) return;
          running = true;
          void check().finally(() => (running = false));
        }, opts.intervalMs)
      : undefined;
  interval?.unref();
  return { check, close: () => clearInterval(interval) };
}
