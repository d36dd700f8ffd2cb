// The vulnerabilities domain's services.
import type { DomainDeps, ServiceBinding } from "../server/bindings.js";
import { advisoriesBindings } from "./advisories.service.js";

export function vulnerabilitiesBindings(deps: DomainDeps): ServiceBinding[] {
  return advisoriesBindings(deps);
}
