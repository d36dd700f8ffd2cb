import type { DescService } from "@bufbuild/protobuf";
import type { ConnectRouter, ServiceImpl } from "@connectrpc/connect";
import type { Db } from "../db/client.js";
import type { ExternalVerifier, IdentityGrants, KeyStore, ProviderLogin } from "../kernel/auth/index.js";
import type { SinkPolicy } from "../events/sinks.js";
import type { ListPlanner } from "../kernel/list/index.js";
import type { SecretBox } from "../iam/secret-box.js";
import type { RateLimits } from "../kernel/rate-limit.js";
import type { TermsSettings } from "../config.js";

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

/** What a domain's services are built from. */
export interface DomainDeps {
  db: Db;
  /** Plans List requests (page size, order, page tokens signed with the server's secret). */
  lists: ListPlanner;
  /** This server's issuer URL; also the audience of its access tokens. */
  issuerUrl: string;
  keys: KeyStore;
  external: ExternalVerifier | undefined;
  /** An identity's home group and role bindings, as the authenticator reads them (the grants cache). */
  grants: (identityUid: string) => Promise<IdentityGrants | undefined>;
  /** Login through an organization's identity provider (the token exchange's `identity_provider`). */
  providerLogin?: ProviderLogin | undefined;
  /**
   * Budgets of repeated failures per caller (kernel/rate-limit.ts); each service keeps its own counts.
   * Default DEFAULT_RATE_LIMITS.
   */
  rateLimits?: Partial<RateLimits> | undefined;
  /** Which event sinks subscriptions may name (events/sinks.ts). */
  sinks: SinkPolicy;
  /** Encrypts secrets kept at rest (identity providers' OIDC client secrets); refuses when no key is configured. */
  secretBox: SecretBox;
  /** Whether an identity provider may name a loopback issuer over plain http (development: kernel/outbound.ts). */
  allowInsecureLoopbackIssuers: boolean;
  /** Lifetime of a refresh token chain of the token exchange, from the exchange that started it. Default 30 days (sts/refresh-tokens.store.ts). */
  refreshTokenTtlSeconds?: number | undefined;
  /** The documents an organization may accept, and the methods needing them (config.ts TERMS_*). */
  terms: TermsSettings;
  /** How long a repeated request for access to the same group is refused. */
  groupAccessRequestWindowMs: number;
}
