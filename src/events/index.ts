// The events domain's services.
import type { DomainDeps, ServiceBinding } from "../server/bindings.js";
import { subscriptionsBindings } from "./subscriptions.service.js";

export function eventsBindings(deps: DomainDeps): ServiceBinding[] {
  return [...subscriptionsBindings(deps)];
}
