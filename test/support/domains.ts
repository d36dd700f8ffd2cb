// The services the domain modules implement (src/modules.ts), for tests that must cover each of their
// methods. Read from the modules' lists: nothing is built.
import type { DescService } from "@bufbuild/protobuf";
import { domainModules } from "../../src/modules.js";

export function implementedServices(): DescService[] {
  return domainModules.flatMap((m) => m.services);
}
