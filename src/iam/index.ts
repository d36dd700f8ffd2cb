// The IAM domain's services.
import type { DomainDeps, ServiceBinding } from "../server/bindings.js";
import { groupsBindings } from "./groups.service.js";
import { identitiesBindings } from "./identities.service.js";
import { roleBindingsBindings } from "./role-bindings.service.js";
import { rolesBindings } from "./roles.service.js";

export function iamBindings(deps: DomainDeps): ServiceBinding[] {
  return [...groupsBindings(deps), ...identitiesBindings(deps), ...rolesBindings(deps), ...roleBindingsBindings(deps)];
}
