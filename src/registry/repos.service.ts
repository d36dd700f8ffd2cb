// ReposService (placeholder until implemented).
import type { DomainDeps, ServiceBinding } from "../server/bindings.js";

export function reposBindings(_deps: DomainDeps): ServiceBinding[] {
  return [];
}
