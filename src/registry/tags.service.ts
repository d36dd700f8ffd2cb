// TagsService (placeholder until implemented).
import type { DomainDeps, ServiceBinding } from "../server/bindings.js";

export function tagsBindings(_deps: DomainDeps): ServiceBinding[] {
  return [];
}
