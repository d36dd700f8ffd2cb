// RolesService (placeholder until implemented).
import type { DomainDeps, ServiceBinding } from "../server/bindings.js";

export function rolesBindings(_deps: DomainDeps): ServiceBinding[] {
  return [];
}
