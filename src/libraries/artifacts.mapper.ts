// Library artifact and version rows to messages (read-only: nothing is written from a message).
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { ArtifactSchema, ArtifactVersionSchema, type Artifact, type ArtifactVersion } from "../../gen/chainguard/platform/libraries/v2/artifacts_pb.js";
import type { LibraryArtifactRow, LibraryArtifactVersionRow } from "../db/schema/index.js";

export function toArtifact(r: LibraryArtifactRow): Artifact {
  return create(ArtifactSchema, {
    uid: r.uid,
    name: r.name,
    description: r.description,
    ecosystem: r.ecosystem,
    latestVersion: r.latestVersion,
    versionCount: r.versionCount,
    createTime: timestampFromDate(r.createTime),
    updateTime: timestampFromDate(r.updateTime),
  });
}

export function toArtifactVersion(r: LibraryArtifactVersionRow): ArtifactVersion {
  return create(ArtifactVersionSchema, {
    uid: r.uid,
    name: r.name,
    version: r.version,
    description: r.description,
    sizeBytes: BigInt(r.sizeBytes),
    createTime: timestampFromDate(r.createTime),
    updateTime: timestampFromDate(r.updateTime),
  });
}
