// The token exchange.
import { SecurityTokenService } from "../../gen/platform/oidc/v1/oidc.platform_pb.js";
import type { DomainModule } from "../kernel/module.js";
import type { StsDeps } from "./deps.js";
import { stsServiceBindings } from "./sts.service.js";

export const stsModule: DomainModule<StsDeps> = {
  name: "sts",
  services: [SecurityTokenService],
  create: (deps) => ({ bindings: stsServiceBindings(deps) }),
};
