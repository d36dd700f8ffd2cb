// The registry domain: repositories, their tags and images; and, when given a blob store, the OCI
// Distribution data plane under /v2/ with its token endpoint (oci/).
import { ImagesService } from "../../gen/chainguard/platform/registry/v2/images_pb.js";
import { ReposService } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { TagsService } from "../../gen/chainguard/platform/registry/v2/tags_pb.js";
import { createAuthenticator, type ExternalVerifier } from "../kernel/auth/index.js";
import type { IdentityDirectory, IdentityGrants } from "../kernel/auth/types.js";
import type { DomainModule, HttpRoute, KernelDeps, StoreDeps } from "../kernel/module.js";
import { imagesBindings } from "./images.service.js";
import { createRegistryAuthorizer, registryServiceOf } from "./oci/auth.js";
import type { BlobStore } from "./oci/contracts.js";
import { createOciRoutes } from "./oci/routes.js";
import { createOciStore } from "./oci/store.js";
import { reposBindings } from "./repos.service.js";
import { tagsBindings } from "./tags.service.js";

/** What the data plane needs besides the stores: where blobs live, and how callers are authenticated. */
export interface RegistryDataPlaneDeps {
  blobs: BlobStore;
  directory: IdentityDirectory;
  external: ExternalVerifier;
  grants: (identityUid: string) => Promise<IdentityGrants | undefined>;
}

export type RegistryDeps = StoreDeps & Partial<Pick<KernelDeps, "issuerUrl" | "keys">> & { dataPlane?: RegistryDataPlaneDeps | undefined };

function dataPlaneRoutes(deps: RegistryDeps): HttpRoute[] {
  const plane = deps.dataPlane;
  if (!plane || !deps.issuerUrl || !deps.keys) return [];
  const service = registryServiceOf(deps.issuerUrl);
  const base = { directory: plane.directory, keys: deps.keys, issuer: deps.issuerUrl, external: plane.external, grants: plane.grants };
  const store = createOciStore(deps.db);
  const auth = createRegistryAuthorizer({
    issuerUrl: deps.issuerUrl,
    service,
    keys: deps.keys,
    platform: createAuthenticator({ ...base, audience: deps.issuerUrl }),
    registry: createAuthenticator({ ...base, audience: service }),
    async resolve(name) {
      const r = await store.resolve(name);
      if (!r.groupUid) return undefined;
      return { name, groupUid: r.groupUid, ...(r.repo ? { repoUid: r.repo.uid, public: r.repo.public } : {}) };
    },
  });
  return createOciRoutes({ db: deps.db, blobs: plane.blobs, auth });
}

export const registryModule: DomainModule<RegistryDeps> = {
  name: "registry",
  services: [ReposService, TagsService, ImagesService],
  create: (deps) => ({
    bindings: [...reposBindings(deps), ...tagsBindings(deps), ...imagesBindings(deps)],
    routes: dataPlaneRoutes(deps),
  }),
};
