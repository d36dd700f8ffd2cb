// RoleBindingsService (placeholder until implemented).
import type { DomainDeps, ServiceBinding } from "../server/bindings.js";

export function roleBindingsBindings(_deps: DomainDeps): ServiceBinding[] {
  return [];
}
