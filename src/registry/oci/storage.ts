// The BlobStore the configuration names (REGISTRY_STORAGE): S3-compatible object storage, or the filesystem
// under the data directory, whose factory the caller passes (it lives with the filesystem store).
import type { RegistryStorageSettings } from "../../config.js";
import type { BlobStore } from "./contracts.js";
import { createS3BlobStore } from "./s3-store.js";

export function openBlobStore(settings: RegistryStorageSettings, filesystem: () => BlobStore): BlobStore {
  return settings.kind === "s3" ? createS3BlobStore(settings) : filesystem();
}
