// PingService: answers without credentials, so a client can check it reaches the service.
import { PingService } from "../../gen/chainguard/platform/ping/v2/ping_pb.js";
import type { DomainModule } from "../kernel/module.js";
import { pingBindings } from "./ping.service.js";

export const pingModule: DomainModule<unknown> = {
  name: "ping",
  services: [PingService],
  create: () => ({ bindings: pingBindings }),
};
