// The libraries domain: language library artifacts.
import { ArtifactsService } from "../../gen/chainguard/platform/libraries/v2/artifacts_pb.js";
import type { DomainModule, StoreDeps } from "../kernel/module.js";
import { artifactsBindings } from "./artifacts.service.js";

export const librariesModule: DomainModule<StoreDeps> = {
  name: "libraries",
  services: [ArtifactsService],
  create: (deps) => ({ bindings: artifactsBindings(deps) }),
};
