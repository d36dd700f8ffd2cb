// The OCI Distribution Specification v1.1 under /v2/ on the API port, and the registry token endpoint
// (/token). Errors are the spec's {"errors":[{"code","message","detail"}]} with its status codes; headers
// (Docker-Content-Digest, Content-Length, Content-Type, Location, Range, OCI-Subject) as the spec says.
//
//   GET  /v2/                                  version check (401 with the challenge when no credentials)
//   GET|HEAD|PUT|DELETE /v2/<name>/manifests/<tag or digest>
//   GET|HEAD|DELETE     /v2/<name>/blobs/<digest>                      (Range on GET)
//   POST   /v2/<name>/blobs/uploads/[?digest=|?mount=&from=]         start, monolithic, or mount
//   PATCH|PUT|GET|DELETE /v2/<name>/blobs/uploads/<id>                 chunk, finish, status, cancel
//   GET  /v2/<name>/tags/list[?n=&last=]         (Link header to the next page)
//   GET  /v2/<name>/referrers/<digest>[?artifactType=]
//
// Blobs are stored once by digest (BlobStore) but reachable in a repo only once linked to it (repo_blobs):
// by a push to it, or a mount from a repo the caller may pull. Manifests are stored as blobs too, and are a
// repo's through its manifests rows (the same rows the OCI layout import writes). Digests are computed while
// the bytes stream in (sha256 and sha512); request bodies stream to the store, responses from it.
import { createHash, randomUUID, type Hash } from "node:crypto";
import type http from "node:http";
import type http2 from "node:http2";
import { constants as http2constants } from "node:http2";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues } from "@connectrpc/connect";
import { Counter, type Registry } from "prom-client";
import { CreateRepoRequestSchema, ReposService } from "../../../gen/chainguard/platform/registry/v2/repos_pb.js";
import type { Db } from "../../db/client.js";
import type { ManifestRow } from "../../db/schema/index.js";
import { accessKey, type Access } from "../../kernel/auth/principal.js";
import { registry as descriptorRegistry } from "../../kernel/descriptors.js";
import { BodyTooLargeError, readBody } from "../../kernel/http-body.js";
import { log } from "../../kernel/log.js";
import type { HttpRoute } from "../../kernel/module.js";
import type { OutboxEvent } from "../../kernel/outbox.js";
import type { RequestRecord } from "../../kernel/request.js";
import { runUnitOfWork } from "../../kernel/unit-of-work.js";
import { recordWriters } from "../../db/read-routing.js";
import { isRecord } from "../../kernel/records.js";
import { IMAGE_CONFIG_TYPES, INDEX_TYPES, MANIFEST_TYPES, MEDIA_TYPES, platformText } from "../oci-media.js";
import { toRepo } from "../repos.mapper.js";
import { createRepoStore } from "../repos.store.js";
import type { RegistryAuth } from "./auth.js";
import { UploadOffsetError, type AccessDecision, type BlobSend, type BlobStore, type RegistryAction, type RepositoryTarget } from "./contracts.js";
import { ManifestContentCache } from "./manifest-cache.js";
import { isSupportedDigest, isTag, isValidName, looksLikeDigest, parseV2Path, splitName, type V2Path } from "./names.js";
import { civilDateTime, createOciStore, PULL_EVENT, PUSH_EVENT, registryEvent, type ManifestPut, type RegistryEventBody, type ResolvedWith } from "./store.js";

type Req = http.IncomingMessage | http2.Http2ServerRequest;
type Res = http.ServerResponse | http2.Http2ServerResponse;

/** The largest manifest accepted (and the largest config blob read for its platform). */
const MAX_MANIFEST_BYTES = 4 * 1024 * 1024;
/** Tags answered when a tags list names no n, and the most a page holds. */
const MAX_TAGS_PAGE = 1000;

type ErrorCode =
  | "BLOB_UNKNOWN"
  | "BLOB_UPLOAD_INVALID"
  | "BLOB_UPLOAD_UNKNOWN"
  | "DIGEST_INVALID"
  | "MANIFEST_BLOB_UNKNOWN"
  | "MANIFEST_INVALID"
  | "MANIFEST_UNKNOWN"
  | "NAME_INVALID"
  | "NAME_UNKNOWN"
  | "SIZE_INVALID"
  | "UNAUTHORIZED"
  | "DENIED"
  | "UNSUPPORTED"
  | "UNKNOWN";

/** An answer in the spec's error format. */
class OciError extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCode,
    message: string,
    readonly detail: unknown = null,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

const nameUnknown = (name: string) => new OciError(404, "NAME_UNKNOWN", `repository ${name} is not known to the registry`, { name });
const blobUnknown = (digest: string) => new OciError(404, "BLOB_UNKNOWN", `blob ${digest} is not known to this repository`, { digest });
const manifestUnknown = (reference: string) => new OciError(404, "MANIFEST_UNKNOWN", `manifest ${reference} is not known to this repository`, { reference });
const uploadUnknown = () => new OciError(404, "BLOB_UPLOAD_UNKNOWN", "no such upload in progress");
const digestInvalid = (message: string, digest?: string) => new OciError(400, "DIGEST_INVALID", message, digest === undefined ? null : { digest });
const malformedDigest = (digest: string) => digestInvalid(`unsupported or malformed digest ${JSON.stringify(digest)}`, digest);

export interface OciRouteDeps {
  db: Db;
  blobs: BlobStore;
  auth: RegistryAuth;
}

interface Counters {
  pushes: Counter<"type">;
  pulls: Counter<"type">;
  bytesIn: Counter;
  bytesOut: Counter;
}

/** Counts the bytes passing through, and feeds them to a hash. */
function hashing(hash: Hash | undefined, count: (n: number) => void): Transform {
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      hash?.update(chunk);
      count(chunk.length);
      done(null, chunk);
    },
  });
}

const hashOf = (digest: string) => createHash(digest.startsWith("sha512:") ? "sha512" : "sha256");

/** A Range header's one range of a blob of `size` bytes; null when unsatisfiable; undefined when absent or not bytes. */
function rangeOf(header: string | undefined, size: number): { start: number; end: number } | null | undefined {
  if (!header) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === "" && m[2] === "")) return undefined;
  let start: number;
  let end: number;
  if (m[1] === "") {
    const suffix = Number(m[2]);
    if (suffix === 0) return null;
    start = Math.max(0, size - suffix);
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1);
  }
  if (start >= size || start > end) return null;
  return { start, end };
}

/** The media types an Accept header lists (parameters dropped); empty: anything. */
function acceptedTypes(header: string | undefined): string[] {
  if (!header) return [];
  return header
    .split(",")
    .map((t) => t.split(";")[0]!.trim().toLowerCase())
    .filter((t) => t !== "");
}

function hasBody(req: Req): boolean {
  const length = req.headers["content-length"];
  if (length !== undefined) return Number(length) > 0;
  if (req.httpVersionMajor === 1) return req.headers["transfer-encoding"] !== undefined;
  return !(req as http2.Http2ServerRequest).stream.endAfterHeaders;
}

/** Running sha256 of uploads whose chunks arrived at this process, in order (else the upload is re-read). */
class RunningHashes {
  readonly #entries = new Map<string, { hash: Hash; size: number }>();
  get(id: string, size: number): Hash | undefined {
    const e = this.#entries.get(id);
    return e && e.size === size ? e.hash : undefined;
  }
  set(id: string, hash: Hash, size: number): void {
    if (this.#entries.size >= 10_000) this.#entries.delete(this.#entries.keys().next().value!);
    this.#entries.set(id, { hash, size });
  }
  delete(id: string): void {
    this.#entries.delete(id);
  }
}

const UPLOAD_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function createOciRoutes(deps: OciRouteDeps): HttpRoute[] {
  const { blobs, auth, db } = deps;
  const store = createOciStore(db);
  const hashes = new RunningHashes();
  const manifestCache = new ManifestContentCache();
  let counters: Counters | undefined;

  const send = (res: Res, status: number, headers: Record<string, string | number>, body?: string | Buffer) => {
    const h: Record<string, string | number> = { ...headers };
    if (body !== undefined) h["content-length"] = Buffer.byteLength(body);
    else if (h["content-length"] === undefined) h["content-length"] = 0;
    (res as http.ServerResponse).writeHead(status, h);
    (res as http.ServerResponse).end(body);
  };
  const json = (res: Res, status: number, value: unknown, headers: Record<string, string> = {}) =>
    send(res, status, { "content-type": "application/json", ...headers }, JSON.stringify(value));

  const sendError = (req: Req, res: Res, err: OciError) => {
    const body = JSON.stringify({ errors: [{ code: err.code, message: err.message, detail: err.detail }] });
    send(res, err.status, { "content-type": "application/json", "docker-distribution-api-version": "registry/2.0", ...err.headers }, req.method === "HEAD" ? undefined : body);
  };

  const refusal = (decision: Extract<AccessDecision, { ok: false }>) =>
    new OciError(decision.status, decision.code, decision.message, null, decision.challenge ? { "www-authenticate": decision.challenge } : {});

  function eventBase(req: Req, target: RepositoryTarget, repoUid: string): Pick<RegistryEventBody, "repository" | "repo_id" | "when" | "location" | "remote_address" | "user_agent"> {
    return {
      repository: target.name,
      repo_id: repoUid,
      when: civilDateTime(new Date()),
      location: "",
      remote_address: req.socket?.remoteAddress ?? "",
      user_agent: String(req.headers["user-agent"] ?? ""),
    };
  }

  const groupOfRepo = (repoUid: string) => repoUid.slice(0, repoUid.lastIndexOf("/"));

  /**
   * Records a pull's event before the pull is answered. A pull changes nothing, and its event is best effort
   * already (one not recorded is logged, the pull still answered), so its transaction commits without waiting
   * for PostgreSQL to flush its log to disk (synchronous_commit off, for that transaction alone): the row is
   * visible at once like any committed row, and only a crash of PostgreSQL in the moment after could lose it.
   * Waiting for that flush was most of the time of a small image's pull (bench/LOG.md).
   */
  async function recordPull(req: Req, target: RepositoryTarget, repoUid: string, actor: string | undefined, body: Pick<RegistryEventBody, "digest" | "type" | "tag">) {
    counters?.pulls.inc({ type: body.type });
    const event: RegistryEventBody = { ...eventBase(req, target, repoUid), method: req.method ?? "GET", ...body };
    await store
      .recordPull(registryEvent(PULL_EVENT, { uid: repoUid, groupUid: groupOfRepo(repoUid) }, actor ?? "", event))
      .catch((err: unknown) => log.warn("registry: pull event not recorded", { repo: repoUid, err }));
  }

  /** A blob push's event (recorded with the blob's link to the repo, in one statement). */
  function blobPushed(req: Req, target: RepositoryTarget, repoUid: string, actor: string | undefined, digest: string) {
    return registryEvent(PUSH_EVENT, { uid: repoUid, groupUid: groupOfRepo(repoUid) }, actor ?? "", { ...eventBase(req, target, repoUid), display_name: splitName(target.name).repo, digest, type: "blob" });
  }

  /** The repo of a push, created when missing and the caller may create repos. */
  async function repoForPush(target: RepositoryTarget, decision: Extract<AccessDecision, { ok: true }>, repoName: string): Promise<string> {
    if (target.repoUid) return target.repoUid;
    if (!decision.mayCreateRepo || target.groupUid === "") throw nameUnknown(target.name);
    try {
      const row = await runUnitOfWork({ db, registry: descriptorRegistry }, async (unit) => {
        const created = await createRepoStore(unit.tx).create(target.groupUid, { name: repoName });
        const repo = toRepo(created);
        unit.record([{ method: ReposService.method.createRepo, request: create(CreateRepoRequestSchema, { parent: target.groupUid, repo }), response: repo }], {
          actor: decision.subject ?? "",
          source: `/v2/${target.name}`,
        });
        unit.keepGrants();
        return created;
      });
      target.repoUid = row.uid;
      return row.uid;
    } catch (err) {
      // Created meanwhile by another push.
      if (err instanceof ConnectError && err.code === Code.AlreadyExists) {
        const again = await store.resolve(target.name);
        if (again.repo) return (target.repoUid = again.repo.uid);
      }
      throw err;
    }
  }

  /** Stages the request body into an upload at `offset`, hashing it; the new size. */
  async function appendBody(req: Req, id: string, offset: number, running: Hash | undefined): Promise<{ size: number; hash: Hash | undefined }> {
    const hash = running?.copy();
    const size = await blobs.append(id, offset, req.pipe(hashing(hash, (n) => counters?.bytesIn.inc(n))));
    return { size, hash };
  }

  /** The digest of a staged upload with the algorithm of `digest`: from the running hash, else re-read. */
  async function digestOfUpload(id: string, size: number, digest: string): Promise<string> {
    const alg = digest.slice(0, digest.indexOf(":"));
    const running = alg === "sha256" ? hashes.get(id, size) : undefined;
    if (running) return `sha256:${running.copy().digest("hex")}`;
    const hash = hashOf(digest);
    await pipeline(await blobs.readUpload(id), hashing(hash, () => {}), new Transform({ transform: (_c, _e, done) => done() }));
    return `${alg}:${hash.digest("hex")}`;
  }

  async function finishUpload(id: string, size: number, digest: string, repoUid: string, pushed: OutboxEvent): Promise<void> {
    const actual = await digestOfUpload(id, size, digest);
    hashes.delete(id);
    await commitVerified(id, size, actual, digest, repoUid, pushed);
  }

  /**
   * Makes a staged upload the blob `digest` linked to the repo, when its content's digest is `digest`; else
   * discards it. A blob already stored is linked, then checked to be still there (garbage collection may have
   * removed it between the two, gc.ts): if it is gone, the staged bytes are committed again, so the link never
   * points at nothing. A new blob is committed first and linked after (young, garbage collection spares it).
   * The link and the push's event (`pushed`) are one statement.
   */
  async function commitVerified(id: string, size: number, actual: string, digest: string, repoUid: string, pushed: OutboxEvent): Promise<void> {
    if (actual !== digest) {
      await blobs.abort(id);
      throw digestInvalid(`the uploaded content's digest is ${actual}, not ${digest}`, digest);
    }
    if (await blobs.stat(digest)) {
      await store.linkPushed(repoUid, digest, size, pushed);
      counters?.pushes.inc({ type: "blob" });
      if (await blobs.stat(digest)) return blobs.abort(id);
      log.info("registry: a blob was collected while being linked; storing it again", { repo: repoUid, digest });
      await blobs.commit(id, digest);
      await store.link(repoUid, digest, size);
      return;
    }
    await blobs.commit(id, digest);
    await store.linkPushed(repoUid, digest, size, pushed);
    counters?.pushes.inc({ type: "blob" });
  }

  const uploadLocation = (name: string, id: string) => `/v2/${name}/blobs/uploads/${id}`;
  const rangeHeader = (size: number) => `0-${Math.max(0, size - 1)}`;

  // ---------------------------------------------------------------------------------------------------
  // Blobs

  /** `linked`: the blob's link as read with the name (null: not linked); undefined: not read yet. */
  async function getBlob(req: Req, res: Res, target: RepositoryTarget, digest: string, actor: string | undefined, linked: number | null | undefined) {
    if (!isSupportedDigest(digest)) throw malformedDigest(digest);
    const repoUid = target.repoUid!;
    const size = linked === undefined ? await store.linkedBlob(repoUid, digest) : (linked ?? undefined);
    if (size === undefined) throw blobUnknown(digest);
    const headers: Record<string, string | number> = {
      "content-type": "application/octet-stream",
      "docker-content-digest": digest,
      "accept-ranges": "bytes",
      etag: `"${digest}"`,
    };
    if (req.method === "HEAD") {
      const stat = await blobs.stat(digest);
      if (!stat) throw blobUnknown(digest);
      return send(res, 200, { ...headers, "content-length": stat.size });
    }
    // A GET opens the blob at once (the link's size is the blob's: both are the verified upload's); only
    // when that fails is the store asked whether the blob is there at all.
    const range = rangeOf(req.headers.range, size);
    if (range === null) {
      throw new OciError(416, "BLOB_UNKNOWN", "the range asked lies outside the blob", { digest }, { "content-range": `bytes */${size}` });
    }
    // The filesystem store sends through reused buffers (openSend); others stream.
    let source: Readable | BlobSend;
    try {
      // The whole blob is sent as the range of the link's size: the store need not stat it for its size.
      source = blobs.openSend ? await blobs.openSend(digest, range ?? { start: 0, end: size - 1 }) : await blobs.read(digest, range);
    } catch (err) {
      if (!(await blobs.stat(digest))) throw blobUnknown(digest);
      throw err;
    }
    if (range) {
      (res as http.ServerResponse).writeHead(206, { ...headers, "content-length": range.end - range.start + 1, "content-range": `bytes ${range.start}-${range.end}/${size}` });
    } else {
      (res as http.ServerResponse).writeHead(200, { ...headers, "content-length": size });
    }
    // The pull's event is recorded while the blob is sent (a small blob's answer would wait for it otherwise);
    // the request ends when both are done.
    const recorded = recordPull(req, target, repoUid, actor, { digest, type: "blob" });
    let sent = 0;
    const count = (n: number) => {
      sent += n;
      counters?.bytesOut.inc(n);
    };
    try {
      if ("pipeTo" in source) await source.pipeTo(res as http.ServerResponse, count);
      else await pipeline(source, hashing(undefined, count), res as http.ServerResponse);
    } finally {
      await recorded;
    }
    return sent;
  }

  async function deleteBlob(res: Res, target: RepositoryTarget, digest: string) {
    if (!isSupportedDigest(digest)) throw malformedDigest(digest);
    if (!(await store.unlink(target.repoUid!, digest))) throw blobUnknown(digest);
    send(res, 202, {});
  }

  // ---------------------------------------------------------------------------------------------------
  // Uploads

  async function startUpload(req: Req, res: Res, target: RepositoryTarget, decision: Extract<AccessDecision, { ok: true }>, repoName: string, query: URLSearchParams) {
    const mount = query.get("mount");
    const from = query.get("from");
    if (mount !== null && from !== null && isSupportedDigest(mount) && isValidName(from)) {
      // A mount from a repo the caller cannot pull, or that lacks the blob, falls back to a plain upload.
      const source = await store.resolve(from);
      if (source.repo && source.groupUid) {
        const fromTarget: RepositoryTarget = { name: from, groupUid: source.groupUid, repoUid: source.repo.uid, public: source.repo.public };
        const allowed = await auth.authorize(req, fromTarget, ["pull"]);
        // The blob is stored (a link may outlive its blob: gc.ts), and the source links it: the mount's link and
        // its event, in one transaction that holds the source's link until it commits, so that garbage collection
        // cannot remove the blob in between (store.mountPushed). A source that no longer links it: an upload.
        if (allowed.ok && allowed.granted.has("pull") && (await blobs.stat(mount))) {
          const repoUid = await repoForPush(target, decision, repoName);
          if (await store.mountPushed(source.repo.uid, repoUid, mount, blobPushed(req, target, repoUid, decision.subject, mount))) {
            counters?.pushes.inc({ type: "blob" });
            return send(res, 201, { location: `/v2/${target.name}/blobs/${mount}`, "docker-content-digest": mount });
          }
        }
      }
    }
    const digest = query.get("digest");
    const repoUid = await repoForPush(target, decision, repoName);
    const id = randomUUID();
    await blobs.startUpload(id);
    if (digest === null) {
      hashes.set(id, createHash("sha256"), 0);
      return send(res, 202, { location: uploadLocation(target.name, id), range: "0-0", "docker-upload-uuid": id });
    }
    // Monolithic: the whole blob in this request.
    if (!isSupportedDigest(digest)) {
      await blobs.abort(id);
      throw malformedDigest(digest);
    }
    const hash = hashOf(digest);
    let size: number;
    try {
      size = await blobs.append(id, 0, req.pipe(hashing(hash, (n) => counters?.bytesIn.inc(n))));
    } catch (err) {
      await blobs.abort(id);
      throw err;
    }
    await commitVerified(id, size, `${digest.slice(0, digest.indexOf(":"))}:${hash.digest("hex")}`, digest, repoUid, blobPushed(req, target, repoUid, decision.subject, digest));
    send(res, 201, { location: `/v2/${target.name}/blobs/${digest}`, "docker-content-digest": digest });
  }

  async function patchUpload(req: Req, res: Res, target: RepositoryTarget, id: string) {
    const size = await blobs.uploadSize(id);
    if (size === undefined) throw uploadUnknown();
    const contentRange = req.headers["content-range"];
    if (contentRange !== undefined) {
      const m = /^(?:bytes )?(\d+)-(\d+)$/.exec(String(contentRange).trim());
      if (!m || Number(m[1]) !== size) {
        req.resume();
        throw new OciError(416, "BLOB_UPLOAD_INVALID", `the chunk must start at offset ${size}`, null, {
          location: uploadLocation(target.name, id),
          range: rangeHeader(size),
          "docker-upload-uuid": id,
        });
      }
    }
    let next;
    try {
      next = await appendBody(req, id, size, hashes.get(id, size));
    } catch (err) {
      if (err instanceof UploadOffsetError) {
        throw new OciError(416, "BLOB_UPLOAD_INVALID", err.message, null, { location: uploadLocation(target.name, id), range: rangeHeader(err.expected) });
      }
      throw err;
    }
    if (next.hash) hashes.set(id, next.hash, next.size);
    send(res, 202, { location: uploadLocation(target.name, id), range: rangeHeader(next.size), "docker-upload-uuid": id });
  }

  async function putUpload(req: Req, res: Res, target: RepositoryTarget, id: string, query: URLSearchParams, actor: string | undefined) {
    let size = await blobs.uploadSize(id);
    if (size === undefined) throw uploadUnknown();
    const digest = query.get("digest");
    if (digest === null || !isSupportedDigest(digest)) {
      req.resume();
      throw digestInvalid(digest === null ? "the digest query parameter is required" : `unsupported or malformed digest ${JSON.stringify(digest)}`, digest ?? undefined);
    }
    if (hasBody(req)) {
      try {
        const next = await appendBody(req, id, size, hashes.get(id, size));
        if (next.hash) hashes.set(id, next.hash, next.size);
        size = next.size;
      } catch (err) {
        if (err instanceof UploadOffsetError) throw new OciError(416, "BLOB_UPLOAD_INVALID", err.message, null, { range: rangeHeader(err.expected) });
        throw err;
      }
    }
    await finishUpload(id, size, digest, target.repoUid!, blobPushed(req, target, target.repoUid!, actor, digest));
    send(res, 201, { location: `/v2/${target.name}/blobs/${digest}`, "docker-content-digest": digest });
  }

  async function uploadStatus(res: Res, target: RepositoryTarget, id: string) {
    const size = await blobs.uploadSize(id);
    if (size === undefined) throw uploadUnknown();
    send(res, 204, { location: uploadLocation(target.name, id), range: rangeHeader(size), "docker-upload-uuid": id });
  }

  async function cancelUpload(res: Res, id: string) {
    if ((await blobs.uploadSize(id)) === undefined) throw uploadUnknown();
    await blobs.abort(id);
    hashes.delete(id);
    send(res, 204, {});
  }

  // ---------------------------------------------------------------------------------------------------
  // Manifests

  /**
   * Stores bytes held in memory (a manifest) as the blob `digest`; true when they were stored now (false: the
   * blob was there already, or the store does not say).
   */
  async function storeBytes(digest: string, bytes: Buffer): Promise<boolean> {
    if (blobs.put) return blobs.put(digest, bytes);
    const id = randomUUID();
    await blobs.startUpload(id);
    await blobs.append(id, 0, Readable.from([bytes]));
    await blobs.commit(id, digest);
    return false;
  }

  async function readSmallBlob(digest: string): Promise<Buffer> {
    const tooLarge = () => new OciError(400, "MANIFEST_INVALID", `blob ${digest} is larger than ${MAX_MANIFEST_BYTES} bytes`);
    if (blobs.readSmall) {
      const bytes = await blobs.readSmall(digest, MAX_MANIFEST_BYTES);
      if (!bytes) throw tooLarge();
      return bytes;
    }
    const chunks: Buffer[] = [];
    let total = 0;
    for await (const chunk of await blobs.read(digest)) {
      total += (chunk as Buffer).length;
      if (total > MAX_MANIFEST_BYTES) throw tooLarge();
      chunks.push(chunk as Buffer);
    }
    return Buffer.concat(chunks);
  }

  /** A stored manifest's content (remembered by digest), or undefined when the store has none. */
  async function manifestContent(digest: string): Promise<Buffer | undefined> {
    const known = manifestCache.get(digest);
    if (known) return known;
    if (!(await blobs.stat(digest))) return undefined;
    const bytes = await readSmallBlob(digest);
    manifestCache.set(digest, bytes);
    return bytes;
  }

  /** The manifest a reference names in the repo: its row and digest, or MANIFEST_UNKNOWN. */
  async function manifestOf(repoUid: string, reference: string, known: ManifestRow | null | undefined) {
    const row = known !== undefined ? (known ?? undefined) : isTag(reference) ? await store.taggedManifest(repoUid, reference) : isSupportedDigest(reference) ? await store.manifest(repoUid, reference) : undefined;
    if (!row) throw manifestUnknown(reference);
    return { row, digest: row.digest };
  }

  /** `known`: the manifest as read with the name (null: none); undefined: not read yet. */
  async function getManifest(req: Req, res: Res, target: RepositoryTarget, reference: string, actor: string | undefined, known: ManifestRow | null | undefined) {
    const repoUid = target.repoUid!;
    const { row, digest } = await manifestOf(repoUid, reference, known);
    const accepted = acceptedTypes(req.headers.accept);
    if (accepted.length > 0 && !accepted.includes("*/*") && !accepted.includes(row.mediaType)) {
      throw new OciError(404, "MANIFEST_UNKNOWN", `manifest ${reference} is a ${row.mediaType}, a media type the request's Accept header does not list`, { reference, mediaType: row.mediaType });
    }
    // Manifests imported from an OCI layout have rows but no stored content.
    const bytes = await manifestContent(digest);
    if (!bytes) throw manifestUnknown(reference);
    await recordPull(req, target, repoUid, actor, { digest, type: "manifest", ...(isTag(reference) ? { tag: reference } : {}) });
    const headers = { "content-type": row.mediaType, "docker-content-digest": digest, etag: `"${digest}"` };
    if (req.method === "HEAD") return send(res, 200, { ...headers, "content-length": bytes.length });
    counters?.bytesOut.inc(bytes.length);
    send(res, 200, headers, bytes);
  }

  async function putManifest(req: Req, res: Res, target: RepositoryTarget, decision: Extract<AccessDecision, { ok: true }>, repoName: string, reference: string) {
    const byDigest = !isTag(reference);
    if (byDigest && !looksLikeDigest(reference)) throw new OciError(400, "MANIFEST_INVALID", `${JSON.stringify(reference)} is neither a tag nor a digest`);
    if (byDigest && !isSupportedDigest(reference)) throw malformedDigest(reference);
    let bytes: Buffer;
    try {
      bytes = await readBody(req as Parameters<typeof readBody>[0], MAX_MANIFEST_BYTES);
    } catch (err) {
      if (err instanceof BodyTooLargeError) throw new OciError(413, "SIZE_INVALID", `a manifest may be at most ${MAX_MANIFEST_BYTES} bytes`, { limit: MAX_MANIFEST_BYTES });
      throw err;
    }
    counters?.bytesIn.inc(bytes.length);
    let doc: unknown;
    try {
      doc = JSON.parse(bytes.toString("utf8"));
    } catch {
      throw new OciError(400, "MANIFEST_INVALID", "the manifest is not JSON");
    }
    if (!isRecord(doc) || doc.schemaVersion !== 2) throw new OciError(400, "MANIFEST_INVALID", "the manifest must be a JSON object with schemaVersion 2 (schema 1 is not supported)");
    const contentType = String(req.headers["content-type"] ?? "").split(";")[0]!.trim();
    const declared = typeof doc.mediaType === "string" ? doc.mediaType : undefined;
    if (declared && contentType && MANIFEST_TYPES.has(contentType) && declared !== contentType) {
      throw new OciError(400, "MANIFEST_INVALID", `the manifest's mediaType ${declared} differs from its Content-Type ${contentType}`);
    }
    const mediaType = MANIFEST_TYPES.has(contentType) ? contentType : declared ?? (Array.isArray(doc.manifests) ? MEDIA_TYPES.ociIndex : MEDIA_TYPES.ociManifest);
    if (!MANIFEST_TYPES.has(mediaType)) throw new OciError(400, "MANIFEST_INVALID", `unsupported manifest media type ${JSON.stringify(mediaType)}`);
    const digest = `${byDigest ? reference.slice(0, reference.indexOf(":")) : "sha256"}:${createHash(byDigest && reference.startsWith("sha512:") ? "sha512" : "sha256").update(bytes).digest("hex")}`;
    if (byDigest && digest !== reference) throw digestInvalid(`the manifest's digest is ${digest}, not ${reference}`, reference);

    const descriptor = (v: unknown, where: string) => {
      if (!isRecord(v) || typeof v.digest !== "string" || !isSupportedDigest(v.digest) || typeof v.size !== "number" || !Number.isSafeInteger(v.size) || v.size < 0) {
        throw new OciError(400, "MANIFEST_INVALID", `${where} is not a valid descriptor`);
      }
      return v as { digest: string; size: number; mediaType?: unknown; platform?: unknown; artifactType?: unknown };
    };
    const subject = doc.subject === undefined ? undefined : descriptor(doc.subject, "subject");
    const repoUid = await repoForPush(target, decision, repoName);
    const isIndex = INDEX_TYPES.has(mediaType);
    const row: ManifestPut = {
      digest,
      mediaType,
      isIndex,
      platform: null,
      size: null,
      children: null,
      manifestSize: BigInt(bytes.length),
      subject: subject?.digest ?? null,
      artifactType: typeof doc.artifactType === "string" ? doc.artifactType : null,
      annotations: isRecord(doc.annotations) ? (doc.annotations as Record<string, string>) : null,
    };
    if (isIndex) {
      if (!Array.isArray(doc.manifests)) throw new OciError(400, "MANIFEST_INVALID", "an index needs a manifests array");
      const children = doc.manifests.map((m, i) => descriptor(m, `manifests[${i}]`));
      const known = await store.manifestsAmong(repoUid, children.map((c) => c.digest));
      const missing = children.find((c) => !known.has(c.digest));
      if (missing) throw new OciError(400, "MANIFEST_BLOB_UNKNOWN", `manifest ${missing.digest} is not in this repository`, { digest: missing.digest });
      row.children = children.map((c) => {
        const p = c.platform as { os?: unknown; architecture?: unknown; variant?: unknown } | undefined;
        const platform = platformText(p);
        return { digest: c.digest, size: c.size, ...(typeof c.mediaType === "string" ? { mediaType: c.mediaType } : {}), ...(platform ? { platform } : {}) };
      });
    } else {
      if (!Array.isArray(doc.layers)) throw new OciError(400, "MANIFEST_INVALID", "an image manifest needs a layers array");
      const config = descriptor(doc.config, "config");
      const layers = doc.layers.map((l, i) => descriptor(l, `layers[${i}]`));
      const wanted = [config, ...layers].map((d) => d.digest);
      const linked = await store.linkedAmong(repoUid, wanted);
      const missing = wanted.find((d) => !linked.has(d));
      if (missing) throw new OciError(400, "MANIFEST_BLOB_UNKNOWN", `blob ${missing} is not in this repository`, { digest: missing });
      row.size = BigInt(config.size) + layers.reduce((s, l) => s + BigInt(l.size), 0n);
      const configType = typeof config.mediaType === "string" ? config.mediaType : "";
      row.artifactType ??= IMAGE_CONFIG_TYPES.has(configType) ? null : configType || null;
      if (IMAGE_CONFIG_TYPES.has(configType) && config.size <= MAX_MANIFEST_BYTES) {
        try {
          const cfg: unknown = JSON.parse((await readSmallBlob(config.digest)).toString("utf8"));
          row.platform = isRecord(cfg) ? (platformText(cfg) ?? null) : null;
        } catch {
          row.platform = null; // a config that is not JSON: no platform
        }
      }
    }
    // The content, stored as a blob under its digest.
    const storedNow = await storeBytes(digest, bytes);
    const tag = byDigest ? undefined : reference;
    // The manifest's row, its tag and its event: one statement, one commit.
    await store.putManifestPushed(
      repoUid,
      row,
      tag,
      registryEvent(PUSH_EVENT, { uid: repoUid, groupUid: groupOfRepo(repoUid) }, decision.subject ?? "", {
        ...eventBase(req, target, repoUid),
        display_name: splitName(target.name).repo,
        digest,
        type: "manifest",
        ...(tag ? { tag } : {}),
      }),
    );
    // With replicas: the pusher's reads through the API (ListTags, GetSize, ...) see this push (a statement of
    // its own after the write, before the answer).
    await recordWriters(db, db, [decision.subject]);
    // A manifest stored before (kept, with its old time) may have been collected before its row committed
    // (gc.ts): then it is stored again. One stored now is young: garbage collection spares it.
    if (!storedNow && !(await blobs.stat(digest))) {
      log.info("registry: a manifest was collected while being pushed; storing it again", { repo: repoUid, digest });
      await storeBytes(digest, bytes);
    }
    counters?.pushes.inc({ type: "manifest" });
    send(res, 201, {
      location: `/v2/${target.name}/manifests/${digest}`,
      "docker-content-digest": digest,
      ...(subject ? { "oci-subject": subject.digest } : {}),
    });
    manifestCache.set(digest, bytes);
  }

  async function deleteManifest(res: Res, target: RepositoryTarget, reference: string, actor: string | undefined) {
    const repoUid = target.repoUid!;
    if (isTag(reference)) {
      if (!(await store.deleteTag(repoUid, reference))) throw manifestUnknown(reference);
    } else {
      if (!isSupportedDigest(reference)) throw malformedDigest(reference);
      if (!(await store.deleteManifest(repoUid, reference))) throw manifestUnknown(reference);
    }
    // With replicas: recorded after the deletion and before the answer (read-routing.ts).
    await recordWriters(db, db, [actor]);
    send(res, 202, {});
  }

  // ---------------------------------------------------------------------------------------------------
  // Discovery

  async function listTags(res: Res, target: RepositoryTarget, query: URLSearchParams) {
    const nText = query.get("n");
    const last = query.get("last") ?? undefined;
    let n = MAX_TAGS_PAGE;
    if (nText !== null) {
      if (!/^\d+$/.test(nText)) throw new OciError(400, "UNSUPPORTED", "n must be a non-negative integer");
      n = Math.min(Number(nText), MAX_TAGS_PAGE);
    }
    const names = n === 0 ? [] : await store.tagNames(target.repoUid!, n + 1, last);
    const page = names.slice(0, n);
    const headers: Record<string, string> = {};
    if (names.length > n) {
      headers.link = `</v2/${target.name}/tags/list?n=${n}&last=${encodeURIComponent(page[page.length - 1]!)}>; rel="next"`;
    }
    json(res, 200, { name: target.name, tags: page }, headers);
  }

  async function referrers(req: Req, res: Res, target: RepositoryTarget, digest: string, query: URLSearchParams) {
    if (!isSupportedDigest(digest)) throw malformedDigest(digest);
    const artifactType = query.get("artifactType") ?? undefined;
    const rows = await store.referrers(target.repoUid!, digest, artifactType);
    const manifests = rows.map((r) => ({
      mediaType: r.mediaType,
      digest: r.digest,
      size: Number(r.size),
      ...(r.artifactType ? { artifactType: r.artifactType } : {}),
      ...(r.annotations ? { annotations: r.annotations } : {}),
    }));
    const body = JSON.stringify({ schemaVersion: 2, mediaType: MEDIA_TYPES.ociIndex, manifests });
    send(res, 200, { "content-type": MEDIA_TYPES.ociIndex, ...(artifactType !== undefined ? { "oci-filters-applied": "artifactType" } : {}) }, req.method === "HEAD" ? undefined : body);
  }

  // ---------------------------------------------------------------------------------------------------
  // Dispatch

  /** The actions an endpoint and method need, or undefined when the method is not allowed there. */
  function actionsOf(p: Exclude<V2Path, { kind: "base" }>, method: string): RegistryAction[] | undefined {
    const read = method === "GET" || method === "HEAD";
    switch (p.kind) {
      case "manifest":
        return read ? ["pull"] : method === "PUT" ? ["pull", "push"] : method === "DELETE" ? ["delete"] : undefined;
      case "blob":
        return read ? ["pull"] : method === "DELETE" ? ["delete"] : undefined;
      case "uploads":
        return method === "POST" ? ["pull", "push"] : undefined;
      case "upload":
        return ["GET", "PATCH", "PUT", "DELETE"].includes(method) ? ["pull", "push"] : undefined;
      case "tags":
      case "referrers":
        return read ? ["pull"] : undefined;
    }
  }

  function decode(part: string): string {
    try {
      return decodeURIComponent(part);
    } catch {
      return part;
    }
  }

  async function serve(req: Req, res: Res, path: string, queryText: string, record: RequestRecord): Promise<void> {
    const method = req.method ?? "GET";
    const query = new URLSearchParams(queryText);
    const p = parseV2Path(path);
    if (!p) throw new OciError(404, "UNSUPPORTED", "not an endpoint of the OCI distribution specification");
    if (p.kind === "base") {
      record.method = "base";
      if (method !== "GET" && method !== "HEAD") throw new OciError(405, "UNSUPPORTED", `${method} is not allowed on /v2/`);
      const decision = await auth.authenticate(req);
      if (!decision.ok) throw refusal(decision);
      noteCaller(record, decision.access);
      return json(res, 200, {}, { "docker-distribution-api-version": "registry/2.0" });
    }
    record.method = `${p.kind}.${method.toLowerCase()}`;
    if (!isValidName(p.name)) throw new OciError(400, "NAME_INVALID", `invalid repository name ${JSON.stringify(p.name.slice(0, 300))}: "<organization>/<repo>", lowercase letters, digits and . _ - separators`, { name: p.name.slice(0, 300) });
    const actions = actionsOf(p, method);
    if (!actions) throw new OciError(405, "UNSUPPORTED", `${method} is not allowed here`, null, { allow: "GET, HEAD" });
    // A pull's next read (the blob's link, the manifest) comes with the name's resolution, in one round trip;
    // it is looked at only once the caller is authorized.
    const read = method === "GET" || method === "HEAD";
    const ref = p.kind === "blob" ? decode(p.digest) : p.kind === "manifest" ? decode(p.reference) : "";
    const resolved: ResolvedWith = !read
      ? await store.resolve(p.name)
      : p.kind === "blob" && isSupportedDigest(ref)
        ? await store.resolveWith(p.name, { blob: ref })
        : p.kind === "manifest" && isTag(ref)
          ? await store.resolveWith(p.name, { tag: ref })
          : p.kind === "manifest" && isSupportedDigest(ref)
            ? await store.resolveWith(p.name, { digest: ref })
            : await store.resolve(p.name);
    const target: RepositoryTarget = { name: p.name, groupUid: resolved.groupUid ?? "", ...(resolved.repo ? { repoUid: resolved.repo.uid, public: resolved.repo.public } : {}) };
    const decision = await auth.authorize(req, target, actions);
    if (!decision.ok) throw refusal(decision);
    noteCaller(record, decision.access);
    const lacking = actions.filter((a) => !decision.granted.has(a));
    if (lacking.length > 0) throw new OciError(403, "DENIED", `the caller may not ${lacking.join(" or ")} in ${p.name}`);
    const pushing = actions.includes("push");
    if (!pushing && !target.repoUid) throw nameUnknown(p.name);
    const subject = decision.subject;
    switch (p.kind) {
      case "manifest": {
        const reference = decode(p.reference);
        if (method === "PUT") return putManifest(req, res, target, decision, resolved.repoName, reference);
        if (method === "DELETE") return deleteManifest(res, target, reference, subject);
        return getManifest(req, res, target, reference, subject, resolved.manifest);
      }
      case "blob": {
        const digest = decode(p.digest);
        if (method === "DELETE") return deleteBlob(res, target, digest);
        const sent = await getBlob(req, res, target, digest, subject, resolved.blobSize);
        if (typeof sent === "number") record.bytesOut = sent;
        return;
      }
      case "uploads":
        return startUpload(req, res, target, decision, resolved.repoName, query);
      case "upload": {
        if (!UPLOAD_ID.test(p.id)) throw uploadUnknown();
        if (!target.repoUid) throw nameUnknown(p.name);
        if (method === "PATCH") return patchUpload(req, res, target, p.id);
        if (method === "PUT") return putUpload(req, res, target, p.id, query, subject);
        if (method === "DELETE") return cancelUpload(res, p.id);
        return uploadStatus(res, target, p.id);
      }
      case "tags":
        return listTags(res, target, query);
      case "referrers":
        return referrers(req, res, target, decode(p.digest), query);
    }
  }

  const v2: HttpRoute = {
    name: "registry",
    handles: (path) => path === "/v2" || path.startsWith("/v2/"),
    streamsBody: (method, path) => (method === "POST" || method === "PATCH" || method === "PUT") && path.includes("/blobs/uploads"),
    observe(registry: Registry) {
      counters = {
        pushes: new Counter({ name: "registry_pushes_total", help: "Manifests and blobs pushed over /v2/.", labelNames: ["type"], registers: [registry] }),
        pulls: new Counter({ name: "registry_pulls_total", help: "Manifests and blobs pulled over /v2/.", labelNames: ["type"], registers: [registry] }),
        bytesIn: new Counter({ name: "registry_received_bytes_total", help: "Blob and manifest bytes received over /v2/.", registers: [registry] }),
        bytesOut: new Counter({ name: "registry_sent_bytes_total", help: "Blob and manifest bytes sent over /v2/.", registers: [registry] }),
      };
    },
    async handle(req, res, path, query, record) {
      // The access line's code: OK for every answer the spec makes a success (201, 202, 204, 206 too);
      // an error's is read from its status.
      record.code = 0 as Code;
      try {
        await serve(req, res, path, query, record);
      } catch (err) {
        record.code = undefined;
        if (res.headersSent) {
          // A response under way (a blob cut off): nothing to answer with but closing.
          if (res.writableEnded) return;
          if (req.httpVersionMajor === 2) (res as http2.Http2ServerResponse).stream.close(http2constants.NGHTTP2_INTERNAL_ERROR);
          else (res as http.ServerResponse).destroy();
          return;
        }
        if (err instanceof OciError) {
          record.code = codeOfStatus(err.status);
          // The rest of a body not read would be taken for the next request: close after answering.
          if (!(req as http.IncomingMessage).complete && req.httpVersionMajor === 1) res.setHeader("connection", "close");
          return sendError(req, res, err);
        }
        // A client gone (its request cut off, or its response closed) has no one to answer. A request destroyed
        // after its body was read whole (an upload's, a manifest's: a request is destroyed once read) is no sign
        // of that: its client waits for the answer.
        const cutOff = (req.destroyed || (req as http.IncomingMessage).aborted) && !(req as http.IncomingMessage).complete;
        if (cutOff || res.destroyed || (req.httpVersionMajor === 2 && (res as http2.Http2ServerResponse).stream.destroyed)) return;
        log.error("registry request failed", { requestId: record.id, path, err });
        record.code = Code.Internal;
        sendError(req, res, new OciError(500, "UNKNOWN", `internal error (request id ${record.id})`));
      }
    },
  };

  const token: HttpRoute = {
    name: "registry-token",
    handles: (path) => path === "/token",
    async handle(req, res, _path, query, record) {
      try {
        if (req.method !== "GET") {
          return sendError(req, res, new OciError(405, "UNSUPPORTED", "the token endpoint answers GET", null, { allow: "GET" }));
        }
        await auth.token(req, res, new URLSearchParams(query));
      } catch (err) {
        log.error("registry token request failed", { requestId: record.id, err });
        if (!res.headersSent) sendError(req, res, new OciError(500, "UNKNOWN", `internal error (request id ${record.id})`));
      }
    },
  };

  return [v2, token];
}

/** The gRPC code an access line names for a spec error's status. */
function codeOfStatus(status: number): Code {
  switch (status) {
    case 400:
      return Code.InvalidArgument;
    case 401:
      return Code.Unauthenticated;
    case 403:
      return Code.PermissionDenied;
    case 404:
      return Code.NotFound;
    case 405:
      return Code.Unimplemented;
    case 413:
    case 416:
      return Code.OutOfRange;
    default:
      return Code.Internal;
  }
}

/** The access line's `uid`: the caller's identity, through the record's context values. */
function noteCaller(record: RequestRecord, access: Access | undefined): void {
  if (!access) return;
  const values = createContextValues();
  values.set(accessKey, access);
  record.values = values;
}
