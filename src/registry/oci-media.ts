// The OCI image and Docker schema 2 media types the registry understands, and the "os/architecture[/variant]"
// text of a platform: one table for the OCI layout import and the /v2/ data plane, which record the same rows.

export const MEDIA_TYPES = {
  ociManifest: "application/vnd.oci.image.manifest.v1+json",
  ociIndex: "application/vnd.oci.image.index.v1+json",
  dockerManifest: "application/vnd.docker.distribution.manifest.v2+json",
  dockerList: "application/vnd.docker.distribution.manifest.list.v2+json",
  ociConfig: "application/vnd.oci.image.config.v1+json",
  dockerConfig: "application/vnd.docker.container.image.v1+json",
} as const;

/** Image manifests (one platform's config and layers). */
export const IMAGE_MANIFEST_TYPES: ReadonlySet<string> = new Set([MEDIA_TYPES.ociManifest, MEDIA_TYPES.dockerManifest]);
/** Image indexes and manifest lists (child manifests). */
export const INDEX_TYPES: ReadonlySet<string> = new Set([MEDIA_TYPES.ociIndex, MEDIA_TYPES.dockerList]);
/** Every manifest type: image manifests and indexes. */
export const MANIFEST_TYPES: ReadonlySet<string> = new Set([...IMAGE_MANIFEST_TYPES, ...INDEX_TYPES]);
/** Image configs, whose os / architecture / variant name an image's platform. */
export const IMAGE_CONFIG_TYPES: ReadonlySet<string> = new Set([MEDIA_TYPES.ociConfig, MEDIA_TYPES.dockerConfig]);

/** "os/architecture[/variant]" of a platform or an image config; undefined when os or architecture is missing. */
export function platformText(p: { os?: unknown; architecture?: unknown; variant?: unknown } | undefined): string | undefined {
  if (!p || typeof p.os !== "string" || typeof p.architecture !== "string" || !p.os || !p.architecture) return undefined;
  return typeof p.variant === "string" && p.variant ? `${p.os}/${p.architecture}/${p.variant}` : `${p.os}/${p.architecture}`;
}
