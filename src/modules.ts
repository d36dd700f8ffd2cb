// The domain modules this server runs (each domain's index.ts). The composition root (compose.ts) hands each
// its dependencies; tests and checks list the services from here, without building anything.
import { advisoryModule } from "./advisory/index.js";
import { eventsModule } from "./events/index.js";
import { iamModule } from "./iam/index.js";
import type { DomainModule } from "./kernel/module.js";
import { librariesModule } from "./libraries/index.js";
import { pingModule } from "./ping/index.js";
import { registryModule } from "./registry/index.js";
import { stsModule } from "./sts/index.js";
import { vulnerabilitiesModule } from "./vulnerabilities/index.js";

export const modules = {
  ping: pingModule,
  iam: iamModule,
  sts: stsModule,
  registry: registryModule,
  events: eventsModule,
  libraries: librariesModule,
  vulnerabilities: vulnerabilitiesModule,
  advisory: advisoryModule,
};

/** Every module, for what reads them all alike (the services they implement). */
export const domainModules: readonly DomainModule<never>[] = Object.values(modules);
