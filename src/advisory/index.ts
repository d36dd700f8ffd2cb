// The advisory domain: security advisory documents.
import { SecurityAdvisoryService } from "../../gen/chainguard/platform/advisory/v2/advisory_pb.js";
import type { DomainModule, StoreDeps } from "../kernel/module.js";
import { securityAdvisoryBindings } from "./security-advisory.service.js";

export const advisoryModule: DomainModule<StoreDeps> = {
  name: "advisory",
  services: [SecurityAdvisoryService],
  create: (deps) => ({ bindings: securityAdvisoryBindings(deps) }),
};
