// The libraries domain's services.
import type { DomainDeps, ServiceBinding } from "../server/bindings.js";
import { artifactsBindings } from "./artifacts.service.js";

export function librariesBindings(deps: DomainDeps): ServiceBinding[] {
  return artifactsBindings(deps);
}
