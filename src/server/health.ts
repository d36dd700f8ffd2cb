// gRPC health checking (grpc.health.v1.Health): Check, Watch and List, as the gRPC health-checking protocol
// describes (https://github.com/grpc/grpc/blob/master/doc/health-checking.md).
//
// The overall health ("") and every service registered on the router are SERVING unless a status was set
// for them. shutdown() turns everything NOT_SERVING, ends every Watch, and ignores later updates: it is the
// first step of a graceful stop, so load balancers drain the process before it closes its listener.
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter, type HandlerContext } from "@connectrpc/connect";
import {
  Health,
  HealthCheckResponseSchema,
  HealthCheckResponse_ServingStatus as ServingStatus,
  HealthListResponseSchema,
  type HealthCheckRequest,
  type HealthCheckResponse,
} from "../../gen/health/v1/health_pb.js";

export { ServingStatus };

export interface HealthService {
  /** Register grpc.health.v1.Health on the router; the router's services become known (SERVING). */
  register(router: ConnectRouter): void;
  /** Set the status of a service ("" is the whole server). Watches of that service see the change. */
  setStatus(service: string, status: ServingStatus): void;
  /** The current status of a service, or undefined when the service is unknown. */
  getStatus(service: string): ServingStatus | undefined;
  /** Everything NOT_SERVING from now on; every Watch receives NOT_SERVING and ends. */
  shutdown(): void;
}

interface Watcher {
  readonly service: string;
  /** Wake the watch: its status may have changed, or the server is shutting down. */
  notify(): void;
}

export function createHealth(): HealthService {
  const explicit = new Map<string, ServingStatus>();
  const routers: ConnectRouter[] = [];
  const watchers = new Set<Watcher>();
  let shuttingDown = false;

  const registered = (service: string): boolean =>
    service === "" || routers.some((r) => r.handlers.some((h) => h.service.typeName === service));

  const getStatus = (service: string): ServingStatus | undefined => {
    const known = explicit.has(service) || registered(service);
    if (!known) return undefined;
    if (shuttingDown) return ServingStatus.NOT_SERVING;
    return explicit.get(service) ?? ServingStatus.SERVING;
  };

  const response = (status: ServingStatus): HealthCheckResponse => create(HealthCheckResponseSchema, { status });

  async function* watch(request: HealthCheckRequest, ctx: HandlerContext): AsyncIterable<HealthCheckResponse> {
    const service = request.service;
    let wake: (() => void) | undefined;
    let dirty = false;
    const watcher: Watcher = {
      service,
      notify() {
        dirty = true;
        wake?.();
      },
    };
    const onAbort = (): void => wake?.();
    watchers.add(watcher);
    ctx.signal.addEventListener("abort", onAbort);
    try {
      let last: ServingStatus | undefined;
      for (;;) {
        dirty = false;
        const status = getStatus(service) ?? ServingStatus.SERVICE_UNKNOWN;
        // Only changes are sent: repeated updates to the same status are not news.
        if (status !== last) {
          last = status;
          yield response(status);
        }
        if (shuttingDown || ctx.signal.aborted) return;
        if (!dirty) {
          await new Promise<void>((resolve) => {
            wake = resolve;
          });
          wake = undefined;
        }
        if (ctx.signal.aborted) return;
      }
    } finally {
      watchers.delete(watcher);
      ctx.signal.removeEventListener("abort", onAbort);
    }
  }

  return {
    register(router) {
      routers.push(router);
      router.service(Health, {
        check(request) {
          const status = getStatus(request.service);
          if (status === undefined) throw new ConnectError(`unknown service: ${request.service}`, Code.NotFound);
          return response(status);
        },
        watch,
        list() {
          const names = new Set<string>([""]);
          for (const r of routers) for (const h of r.handlers) names.add(h.service.typeName);
          for (const name of explicit.keys()) names.add(name);
          const statuses: Record<string, HealthCheckResponse> = {};
          for (const name of names) statuses[name] = response(getStatus(name) ?? ServingStatus.SERVICE_UNKNOWN);
          return create(HealthListResponseSchema, { statuses });
        },
      });
    },
    setStatus(service, status) {
      if (shuttingDown) return;
      explicit.set(service, status);
      for (const w of watchers) if (w.service === service) w.notify();
    },
    getStatus,
    shutdown() {
      if (shuttingDown) return;
      shuttingDown = true;
      for (const w of watchers) w.notify();
    },
  };
}
