// The advisory domain's services.
import type { DomainDeps, ServiceBinding } from "../server/bindings.js";
import { securityAdvisoryBindings } from "./security-advisory.service.js";

export function advisoryBindings(deps: DomainDeps): ServiceBinding[] {
  return securityAdvisoryBindings(deps);
}
