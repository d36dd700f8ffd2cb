// What the token exchange is built from.
import type { ExternalVerifier, IdentityGrants, ProviderLogin } from "../kernel/auth/index.js";
import type { KernelDeps } from "../kernel/module.js";
import type { RateLimits } from "../kernel/rate-limit.js";

export interface StsDeps extends Omit<KernelDeps, "lists"> {
  external: ExternalVerifier | undefined;
  /** An identity's home group and role bindings, as the authenticator reads them (the grants cache). */
  grants: (identityUid: string) => Promise<IdentityGrants | undefined>;
  /** Login through an organization's identity provider (the token exchange's `identity_provider`). */
  providerLogin?: ProviderLogin | undefined;
  /** Budgets of repeated failures per caller (kernel/rate-limit.ts). Default DEFAULT_RATE_LIMITS. */
  rateLimits?: Partial<RateLimits> | undefined;
  /** Lifetime of a refresh token chain of the token exchange, from the exchange that started it. Default 30 days (sts/refresh-tokens.store.ts). */
  refreshTokenTtlSeconds?: number | undefined;
}
