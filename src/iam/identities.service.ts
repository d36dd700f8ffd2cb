// IdentitiesService (placeholder until implemented).
import type { DomainDeps, ServiceBinding } from "../server/bindings.js";

export function identitiesBindings(_deps: DomainDeps): ServiceBinding[] {
  return [];
}
