// GroupsService (placeholder until implemented).
import type { DomainDeps, ServiceBinding } from "../server/bindings.js";

export function groupsBindings(_deps: DomainDeps): ServiceBinding[] {
  return [];
}
