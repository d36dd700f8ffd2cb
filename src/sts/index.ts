// The token exchange service.
import type { DomainDeps, ServiceBinding } from "../server/bindings.js";

export function stsBindings(_deps: DomainDeps): ServiceBinding[] {
  return [];
}
