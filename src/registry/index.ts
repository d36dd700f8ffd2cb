// The registry domain: repositories, their tags and images.
import { ImagesService } from "../../gen/chainguard/platform/registry/v2/images_pb.js";
import { ReposService } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { TagsService } from "../../gen/chainguard/platform/registry/v2/tags_pb.js";
import type { DomainModule, StoreDeps } from "../kernel/module.js";
import { imagesBindings } from "./images.service.js";
import { reposBindings } from "./repos.service.js";
import { tagsBindings } from "./tags.service.js";

export const registryModule: DomainModule<StoreDeps> = {
  name: "registry",
  services: [ReposService, TagsService, ImagesService],
  create: (deps) => ({ bindings: [...reposBindings(deps), ...tagsBindings(deps), ...imagesBindings(deps)] }),
};
