// What the IAM domain's services are built from.
import type { TermsSettings } from "../config.js";
import type { ExternalVerifier, IdentityGrants } from "../kernel/auth/index.js";
import type { KernelDeps } from "../kernel/module.js";
import type { OutboundPolicy } from "../kernel/outbound.js";
import type { RateLimits } from "../kernel/rate-limit.js";
import type { SecretBox } from "./secret-box.js";

export interface IamDeps extends Omit<KernelDeps, "keys"> {
  external: ExternalVerifier | undefined;
  /** An identity's home group and role bindings, as the authenticator reads them (the grants cache). */
  grants: (identityUid: string) => Promise<IdentityGrants | undefined>;
  /**
   * Budgets of repeated failures per caller (kernel/rate-limit.ts); each service keeps its own counts.
   * Default DEFAULT_RATE_LIMITS.
   */
  rateLimits?: Partial<RateLimits> | undefined;
  /** Where the server may connect on a user's word (an identity provider's issuer, as event sinks). */
  sinks: OutboundPolicy;
  /** Encrypts secrets kept at rest (identity providers' OIDC client secrets); refuses when no key is configured. */
  secretBox: SecretBox;
  /** Whether an identity provider may name a loopback issuer over plain http (development: kernel/outbound.ts). */
  allowInsecureLoopbackIssuers: boolean;
  /** The documents an organization may accept, and the methods needing them (config.ts TERMS_*). */
  terms: TermsSettings;
  /** How long a repeated request for access to the same group is refused. */
  groupAccessRequestWindowMs: number;
}
