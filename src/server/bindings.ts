import type { DescService } from "@bufbuild/protobuf";

/** A domain's implementation of (some methods of) one API service. Missing methods answer UNIMPLEMENTED. */
export interface ServiceBinding {
  service: DescService;
  impl: object;
}
