// The registry domain's services.
import type { DomainDeps, ServiceBinding } from "../server/bindings.js";
import { imagesBindings } from "./images.service.js";
import { reposBindings } from "./repos.service.js";
import { tagsBindings } from "./tags.service.js";

export function registryBindings(deps: DomainDeps): ServiceBinding[] {
  return [...reposBindings(deps), ...tagsBindings(deps), ...imagesBindings(deps)];
}
