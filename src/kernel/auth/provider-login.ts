// Login through an organization's identity provider, as an interface the IAM domain implements
// (iam/sso-login.ts) and the token exchange calls: the exchange only mints the token, while which identity
// an ID token is, creating it on first login, and the role bindings its groups bring, stay IAM's business.
import type { ExternalAssumption } from "./external.js";

export interface ProviderLogin {
  /**
   * Verifies `token` as an ID token of the identity provider `providerUid`, finds the identity it correlates
   * to (creating it on first login) and brings its group-mapped role bindings in line with the token's
   * groups claim, all in one transaction. Refuses with an ExternalTokenError when the token is not one of the
   * provider's (the same NOT_ACCEPTED for an unknown provider), and with UNAUTHENTICATED when the identity
   * has been deactivated. `signal` is the exchange's: aborted before the commit, nothing is changed.
   */
  login(providerUid: string, token: string, signal?: AbortSignal): Promise<ExternalAssumption>;
}
