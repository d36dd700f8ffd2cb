// PingService: answers without credentials, so a client can check it reaches the service.
import type { ServiceImpl } from "@connectrpc/connect";
import { PingService } from "../../gen/chainguard/platform/ping/v2/ping_pb.js";
import { bindService, type ServiceBinding } from "../kernel/module.js";

const impl: ServiceImpl<typeof PingService> = {
  ping: () => ({ response: "pong" }),
};

export const pingBindings: ServiceBinding[] = [bindService(PingService, impl)];
