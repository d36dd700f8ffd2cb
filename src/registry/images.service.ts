// ImagesService: read-only facts about the manifests a repo holds. Both methods are authorized by the auth
// interceptor (CAP_REPO_LIST and CAP_MANIFEST_METADATA_LIST on the repo's group) before they run.
//
// Decisions:
// - GetArchitectures answers the architectures a digest provides, named as the published SDK names them
//   ("amd64", "arm64", "arm/v7": images.mapper.ts architectureName; the import stores "linux/amd64"): an
//   index's children in index order (attestation entries, "unknown/unknown", skipped), an image manifest's
//   own (none when the import could not read its platform).
// - GetSize answers the config + layers size of one image manifest, and names its architecture so in
//   `architecture`. For an image manifest that is the manifest itself (an `architecture` that contradicts
//   its platform is NOT_FOUND). For an index, `architecture` selects the child, as GetArchitectures names it
//   ("amd64", "arm/v7") or as a platform ("linux/amd64", "linux/arm/v7"); without one, "amd64", as the
//   published proto says (an index that provides none is NOT_FOUND naming what it provides). A selection
//   matching several platforms ("arm" for v6 and v7) is INVALID_ARGUMENT on `architecture` listing them.
// - A missing repo is NOT_FOUND naming the repo; a digest the repo does not hold (or an index child it does
//   not hold) is NOT_FOUND naming `<repo uid>@<digest>`. A malformed digest is INVALID_ARGUMENT on `digest`.
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { ArchitecturesSchema, ImagesService, SizeSchema } from "../../gen/chainguard/platform/registry/v2/images_pb.js";
import { failedPrecondition, invalidArgument, notFound, throwIfAny } from "../kernel/errors/index.js";
import type { ManifestRow } from "../db/schema/index.js";
import { storeFactory } from "../kernel/unit-of-work.js";
import { bindService, type StoreDeps, type ServiceBinding } from "../kernel/module.js";
import { ARCHITECTURE_PATTERN, architectureName, architecturesOf, platformEntries, selectPlatform, type PlatformEntry } from "./images.mapper.js";
import { createManifestStore, MANIFEST_TYPE } from "./images.store.js";
import { digestViolations } from "./tags.mapper.js";


const listed = (entries: readonly PlatformEntry[]) => architecturesOf(entries).join(", ") || "none";

/** The architecture GetSize answers for when none is asked (the published proto's default). */
export const DEFAULT_ARCHITECTURE = "amd64";

/** The one entry `requested` (possibly empty) selects among what the manifest provides. */
function choose(m: ManifestRow, entries: readonly PlatformEntry[], requested: string, name: string): PlatformEntry | undefined {
  if (requested === "") {
    if (!m.isIndex) return entries[0];
    if (entries.length === 0) {
      throw failedPrecondition({ type: "NO_PLATFORM_IMAGES", subject: name, description: `the index ${name} lists no platform images` });
    }
  }
  const architecture = requested || DEFAULT_ARCHITECTURE;
  if (!m.isIndex && entries.length === 0) return undefined; // platform unknown: the manifest is the only answer
  const selected = selectPlatform(entries, architecture);
  const digests = new Set(selected.map((e) => e.digest));
  if (digests.size === 0) {
    throw notFound(MANIFEST_TYPE, name, `${name} provides no ${architecture} image; it provides ${listed(entries)}`);
  }
  if (digests.size > 1) {
    throw invalidArgument({
      field: "architecture",
      description: `${JSON.stringify(architecture)} matches several platforms (${listed(selected)}); name one of them`,
    });
  }
  return selected[0];
}

export function imagesBindings(deps: StoreDeps): ServiceBinding[] {
  const manifests = storeFactory(deps.db, createManifestStore);

  const impl: ServiceImpl<typeof ImagesService> = {
    async getArchitectures(req, ctx) {
      throwIfAny(digestViolations(req.digest));
      const m = await manifests(ctx).get(req.repoUid, req.digest);
      return create(ArchitecturesSchema, { architectures: architecturesOf(platformEntries(m)) });
    },

    async getSize(req, ctx) {
      const violations = digestViolations(req.digest);
      if (req.architecture !== "" && !ARCHITECTURE_PATTERN.test(req.architecture)) {
        violations.push({
          field: "architecture",
          description: 'must be an architecture as GetArchitectures names it ("amd64", "arm/v7") or a platform ("linux/arm64", "linux/arm/v7")',
        });
      }
      throwIfAny(violations);
      const store = manifests(ctx);
      const m = await store.get(req.repoUid, req.digest);
      const name = `${req.repoUid}@${req.digest}`;
      const entry = choose(m, platformEntries(m), req.architecture, name);
      const image = m.isIndex && entry ? await store.get(req.repoUid, entry.digest) : m;
      if (image.isIndex || image.size === null) {
        const what = `${req.repoUid}@${image.digest}`;
        throw failedPrecondition({
          type: "SIZE_UNKNOWN",
          subject: what,
          description: image.isIndex ? `${what} is a nested index; its size is not recorded` : `the size of ${what} is not recorded`,
        });
      }
      const platform = entry?.platform ?? platformEntries(image)[0]?.platform;
      return create(SizeSchema, { size: image.size, architecture: platform ? architectureName(platform) : "" });
    },
  };

  return [bindService(ImagesService, impl)];
}
