// A domain as the server sees it: one module each domain exports once (its index.ts). The module names the
// API services it implements (read without building anything, so tests and checks can list them) and builds,
// from its own narrow dependencies, their implementations, the HTTP routes it serves beside the API, and the
// background worker it runs. The server registers what modules give it and knows none of them by name; the
// composition root (src/compose.ts) chooses the modules and hands each its dependencies.
import type http from "node:http";
import type http2 from "node:http2";
import type { DescService } from "@bufbuild/protobuf";
import type { ConnectRouter, ServiceImpl } from "@connectrpc/connect";
import type { Registry } from "prom-client";
import type { Db } from "../db/client.js";
import type { KeyStore } from "./auth/keys.js";
import type { IdentityDirectory } from "./auth/types.js";
import type { ListPlanner } from "./list/index.js";
import type { RequestRecord } from "./request.js";

/**
 * A domain's implementation of one API service, made with bindService so the implementation is checked
 * against the service: a misspelled or missing method fails to compile. Services no domain binds answer
 * UNIMPLEMENTED on every method.
 */
export interface ServiceBinding {
  service: DescService;
  /** Registers the implementation on a router (the server's, and the REST gateway's). */
  register(router: ConnectRouter): void;
}

export function bindService<S extends DescService>(service: S, impl: ServiceImpl<S>): ServiceBinding {
  return { service, register: (router) => void router.service(service, impl) };
}

/**
 * Some methods of a service, replacing or completing a domain's (tests inject behaviour with this); the
 * methods it lacks answer UNIMPLEMENTED.
 */
export function bindPartial<S extends DescService>(service: S, impl: Partial<ServiceImpl<S>>): ServiceBinding {
  return { service, register: (router) => void router.service(service, impl) };
}

/** What the kernel gives every domain that asks for it. */
export interface KernelDeps {
  db: Db;
  /** Plans List requests (page size, order, page tokens signed with the server's secret). */
  lists: ListPlanner;
  /** This server's issuer URL; also the audience of its access tokens. */
  issuerUrl: string;
  keys: KeyStore;
}

/**
 * Paths a domain serves beside the API services, on their own protocol (SCIM now; the registry's data plane
 * next). The server asks each route in turn before the REST gateway, and labels the requests' metrics with
 * the route's name.
 */
export interface HttpRoute {
  name: string;
  handles(path: string): boolean;
  /** Answers one request; `query` is what follows the path's `?` (empty when none). */
  handle(req: http.IncomingMessage | http2.Http2ServerRequest, res: http.ServerResponse | http2.Http2ServerResponse, path: string, query: string, record: RequestRecord): Promise<void>;
  /**
   * Whether a request's body streams (a blob upload): the listener then gives it an idle timeout instead of
   * the whole-request deadline (server/listener.ts), and no size limit applies but the route's own.
   */
  streamsBody?(method: string, path: string): boolean;
  /** Registers the route's own metrics on the server's registry. */
  observe?(registry: Registry): void;
}

/** A domain's background worker while it runs. */
export interface RunningWorker {
  /** Stops taking work, and lets the work in flight finish for up to graceMs. */
  stop(graceMs?: number): Promise<void>;
  /** Registers the worker's metrics on the server's registry. */
  observe?(registry: Registry): void;
}

/** What a module builds from its dependencies. */
export interface DomainInstance<W extends RunningWorker = RunningWorker> {
  /** The implementations of the module's services (each one of `DomainModule.services`). */
  bindings: readonly ServiceBinding[];
  routes?: readonly HttpRoute[];
  /** Starts the module's background worker; the composition root decides whether it runs. */
  startWorker?(): Promise<W>;
}

/**
 * What the kernel needs from the domain that owns identities (IAM), made before any module is created: the
 * authenticator reads the directory, and the verifier of external tokens that some modules take is built on it.
 */
export interface KernelHooks {
  /** Identities and their grants, as authentication reads them. */
  directory: IdentityDirectory;
  /** The terms documents accepted for a group (or a resource in one) or any of its ancestors: the terms gate. */
  termsAccepted(uid: string): Promise<ReadonlySet<string>>;
  /** The services whose writes can change what a caller is granted: the grants remembered are forgotten after each. */
  grantServices: readonly string[];
}

export interface DomainModule<Deps, W extends RunningWorker = RunningWorker> {
  name: string;
  /** The API services the module implements. */
  services: readonly DescService[];
  create(deps: Deps): DomainInstance<W>;
  /** What the kernel needs from this module, when it owns identities (one module does). */
  hooks?(deps: Pick<KernelDeps, "db">): KernelHooks;
}

/** What a domain that only stores and lists needs (registry, libraries, advisory, vulnerabilities). */
export type StoreDeps = Pick<KernelDeps, "db" | "lists">;
