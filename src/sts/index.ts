// The token exchange service.
import type { DomainDeps, ServiceBinding } from "../server/bindings.js";
import { stsServiceBindings } from "./sts.service.js";

export function stsBindings(deps: DomainDeps): ServiceBinding[] {
  return stsServiceBindings(deps);
}
