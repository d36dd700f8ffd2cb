// The services the built domains implement (app.ts domainBindings), for tests that must cover each of their
// methods. Only the bindings' services are read: no binding is registered, so the dependencies are unused.
import type { DescService } from "@bufbuild/protobuf";
import { DEFAULT_TERMS } from "../../src/config.js";
import { domainBindings } from "../../src/server/app.js";
import type { DomainDeps } from "../../src/server/bindings.js";

export function implementedServices(): DescService[] {
  const unused = undefined as never;
  const deps: DomainDeps = { db: unused, lists: unused, issuerUrl: "", keys: unused, external: undefined, grants: unused, sinks: unused, secretBox: unused, allowInsecureLoopbackIssuers: false, terms: DEFAULT_TERMS, groupAccessRequestWindowMs: 0 };
  return domainBindings(deps).map(({ service }) => service);
}
