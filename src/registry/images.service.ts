// ImagesService (placeholder until implemented).
import type { DomainDeps, ServiceBinding } from "../server/bindings.js";

export function imagesBindings(_deps: DomainDeps): ServiceBinding[] {
  return [];
}
