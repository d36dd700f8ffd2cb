import type { DescService } from "@bufbuild/protobuf";
import type { Db } from "../db/client.js";
import type { ExternalVerifier, KeyStore } from "../kernel/auth/index.js";

/** A domain's implementation of (some methods of) one API service. Missing methods answer UNIMPLEMENTED. */
export interface ServiceBinding {
  service: DescService;
  impl: object;
}

/** What a domain's services are built from. */
export interface DomainDeps {
  db: Db;
  /** Signs list page tokens (kernel/list). */
  pageTokenSecret: Uint8Array;
  /** This server's issuer URL; also the audience of its access tokens. */
  issuerUrl: string;
  keys: KeyStore;
  external: ExternalVerifier | undefined;
}
