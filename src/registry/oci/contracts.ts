// The seams of the registry's data plane (OCI Distribution under /v2/): where blobs are kept, and who may
// pull, push or delete. The routes (oci/routes.ts) use both and know neither backend nor token format.
import type http from "node:http";
import type http2 from "node:http2";
import type { Readable, Writable } from "node:stream";
import type { Access } from "../../kernel/auth/principal.js";

/**
 * Content-addressed blob storage. A blob is written once under its digest ("sha256:<hex>" or
 * "sha512:<hex>") and never changes. Uploads in progress are staged apart from blobs: staged bytes are never
 * readable as a blob until commit, which is atomic. Implementations: the filesystem under the data
 * directory (the default) and S3-compatible object storage.
 */
export interface BlobStore {
  readonly kind: "filesystem" | "s3";
  /** The size of a committed blob, or undefined when there is none. */
  stat(digest: string): Promise<{ size: number } | undefined>;
  /** Streams a committed blob, whole or the inclusive byte range [start, end]. Rejects when absent. */
  read(digest: string, range?: { start: number; end: number }): Promise<Readable>;
  /**
   * Optional (the filesystem store): opens a committed blob, whole or the inclusive range, to be written to a
   * response through a few buffers reused from one blob to the next, instead of a new buffer per read (whose
   * collection was most of a large pull's CPU). Rejects when absent, like read.
   */
  openSend?(digest: string, range?: { start: number; end: number }): Promise<BlobSend>;
  /** Removes a committed blob (garbage collection); an absent blob is not an error. */
  delete(digest: string): Promise<void>;
  /** Every committed blob, with the time it was written (garbage collection spares recent ones). */
  list(): AsyncIterable<{ digest: string; modified: Date }>;

  /** Starts an empty upload under a new id (a UUID chosen by the caller). */
  startUpload(id: string): Promise<void>;
  /**
   * Appends a chunk to an upload. `offset` must equal the bytes staged so far (else it rejects with
   * UploadOffsetError and stages nothing of this chunk). Resolves to the new staged size.
   */
  append(id: string, offset: number, data: Readable): Promise<number>;
  /** Bytes staged so far, or undefined when there is no such upload. */
  uploadSize(id: string): Promise<number | undefined>;
  /** Streams the staged bytes (to compute a digest when no running hash was kept). */
  readUpload(id: string): Promise<Readable>;
  /**
   * Makes the staged bytes the blob `digest` (the caller verified the digest) and removes the upload. If the
   * blob already exists, the upload is discarded and the existing blob kept.
   */
  commit(id: string, digest: string): Promise<void>;
  /**
   * Optional (the filesystem store): stores bytes held in memory (a manifest) as the blob `digest` in one step,
   * instead of an upload started, appended to and committed. Resolves true when it stored them, false when the
   * blob was stored already (kept as it is, with its old time).
   */
  put?(digest: string, bytes: Buffer): Promise<boolean>;
  /**
   * Optional (the filesystem store): a committed blob's bytes when it has at most `limit` of them (undefined
   * when it has more), read whole into one buffer. Rejects when absent.
   */
  readSmall?(digest: string, limit: number): Promise<Buffer | undefined>;
  /** Discards an upload; an absent upload is not an error. */
  abort(id: string): Promise<void>;
  /** Every upload in progress, with the time it last grew (cleanup removes abandoned ones). */
  listUploads(): AsyncIterable<{ id: string; modified: Date }>;
  /** Releases connections or handles. */
  close?(): Promise<void>;
}

/** A committed blob opened for sending (BlobStore.openSend). */
export interface BlobSend {
  /**
   * Writes the blob's bytes to `out` and ends it; `sent` is told each chunk's length as it is written. Rejects
   * when `out` closes or fails first. Closes the blob either way.
   */
  pipeTo(out: Writable, sent: (bytes: number) => void): Promise<void>;
  /** Closes the blob without sending it. */
  close(): Promise<void>;
}

export class UploadOffsetError extends Error {
  constructor(readonly expected: number) {
    super(`upload offset must be ${expected}`);
  }
}

export type RegistryAction = "pull" | "push" | "delete";

/** What the route needs to know about the repository a request names, to decide access. */
export interface RepositoryTarget {
  /** The full name as the client wrote it: "<organization>/<repo path>". */
  name: string;
  /** The group that holds (or, for a push that creates it, would hold) the repo. */
  groupUid: string;
  /** The repo's uid when it exists. */
  repoUid?: string;
  /** Whether its owner made it readable without credentials. */
  public?: boolean;
}

export type AccessDecision =
  | {
      ok: true;
      /** The identity uid, or undefined for an anonymous pull of a public repo. */
      subject: string | undefined;
      /** Of the actions asked, those granted (a route needing one not granted answers DENIED). */
      granted: ReadonlySet<RegistryAction>;
      /** The caller's access, when it is an identity (the access line names it). */
      access?: Access | undefined;
      /** Whether a push may create the repo when it does not exist yet. */
      mayCreateRepo?: boolean;
    }
  | {
      ok: false;
      /** 401 (no or bad credentials: send the challenge) or 403 (known caller, action not granted). */
      status: 401 | 403;
      /** The WWW-Authenticate value to send with a 401. */
      challenge?: string;
      code: "UNAUTHORIZED" | "DENIED";
      message: string;
    };

type Request = http.IncomingMessage | http2.Http2ServerRequest;

/** Decides who a data-plane request is and what it may do. */
export interface RegistryAuthorizer {
  /** The WWW-Authenticate challenge for a request lacking credentials, with its scope (if any). */
  challenge(scope?: { repository: string; actions: readonly RegistryAction[] }): string;
  /** The caller of a request without naming a repository (GET /v2/): undefined when the request has no credentials. */
  authenticate(req: Request): Promise<AccessDecision>;
  /** Decides the asked actions on one repository. */
  authorize(req: Request, target: RepositoryTarget, actions: readonly RegistryAction[]): Promise<AccessDecision>;
}
