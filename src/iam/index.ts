// The IAM domain's services.
import type { DomainDeps, ServiceBinding } from "../server/bindings.js";

export function iamBindings(_deps: DomainDeps): ServiceBinding[] {
  return [];
}
