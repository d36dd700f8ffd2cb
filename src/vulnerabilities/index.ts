// The vulnerabilities domain: vulnerability advisories.
import { AdvisoriesService } from "../../gen/chainguard/platform/vulnerabilities/v2/advisories_pb.js";
import type { DomainModule, StoreDeps } from "../kernel/module.js";
import { advisoriesBindings } from "./advisories.service.js";

export const vulnerabilitiesModule: DomainModule<StoreDeps> = {
  name: "vulnerabilities",
  services: [AdvisoriesService],
  create: (deps) => ({ bindings: advisoriesBindings(deps) }),
};
