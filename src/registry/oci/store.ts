// The registry data plane's rows: which repo a /v2/ name is, the blobs linked to a repo (repo_blobs), the
// manifests and tags pushed (the same rows the OCI layout import writes, so ListTags, GetTag, GetSize and
// GetArchitectures show a push at once), the referrers of a manifest, and the push and pull events.
import { and, asc, eq, gt, inArray, isNull, or, sql } from "drizzle-orm";
import { Audience } from "../../../gen/apiserver/options/v1/options_pb.js";
import { groups, manifests, repoBlobs, repos, tags, type ManifestRow } from "../../db/schema/index.js";
import type { OutboxEvent } from "../../kernel/outbox.js";
import { recordEvents } from "../../kernel/unit-of-work.js";
import type { Executor } from "../../kernel/store.js";
import { tagKindOf } from "../tag-kind.js";
import { newChildUid } from "../../kernel/uidp.js";
import { splitName } from "./names.js";

export interface ResolvedName {
  /** The organization's root group, when the name's first segment is one. */
  groupUid: string | undefined;
  /** The repo's name within the organization. */
  repoName: string;
  repo: { uid: string; public: boolean } | undefined;
}

/** A manifest as a push records it. */
export type ManifestPut = Omit<typeof manifests.$inferInsert, "repoUid" | "createTime">;

/** The body of dev.chainguard.registry.push.v1 and pull.v1, as the published SDK's events/registry package names its fields. */
export interface RegistryEventBody {
  /** The name as the request wrote it ("<organization>/<repo>"). */
  repository: string;
  repo_id: string;
  /** Pushes only: the repo's own name, without its organization. */
  display_name?: string;
  tag?: string;
  tag_previous_digest?: string;
  digest: string;
  /** Pulls only: GET or HEAD. */
  method?: string;
  type: "manifest" | "blob";
  when: string;
  /**
   * The client's approximate location, as the SDK's comment says ("ColumbusOHUS"): always empty here, since this
   * server has no geolocation database to find it from the client's address (remote_address carries that).
   */
  location: string;
  remote_address: string;
  user_agent: string;
}

export const PUSH_EVENT = "dev.chainguard.registry.push.v1";
export const PULL_EVENT = "dev.chainguard.registry.pull.v1";

/**
 * The outbox row of a push or pull: about the repo, in its group (so its subscriptions, and those of every
 * group above, receive it), for the customer audience; the body as the SDK's events/registry package defines
 * it, with no proto message name (it is no proto message).
 */
export function registryEvent(type: typeof PUSH_EVENT | typeof PULL_EVENT, repo: { uid: string; groupUid: string }, actor: string, body: RegistryEventBody): OutboxEvent {
  return {
    type,
    subject: repo.uid,
    groupUid: repo.groupUid,
    audience: Audience.CUSTOMER,
    method: type === PUSH_EVENT ? "/v2/push" : "/v2/pull",
    actor,
    body: { ...body },
    bodyType: "",
    extensions: { group: repo.groupUid },
  };
}

/** civil.DateTime's text form (the SDK's `when`): UTC, no offset, microseconds when not zero. */
export function civilDateTime(d: Date): string {
  const iso = d.toISOString(); // 2026-11-27T17:32:37.123Z
  const ms = d.getUTCMilliseconds();
  return ms === 0 ? iso.slice(0, 19) : `${iso.slice(0, 19)}.${String(ms * 1000).padStart(6, "0")}`;
}

export function createOciStore(db: Executor) {
  return {
    /** The organization and repo a name points at (none may exist). */
    async resolve(name: string): Promise<ResolvedName> {
      const { organization, repo: repoName } = splitName(name);
      const orgs = await db
        .select({ uid: groups.uid })
        .from(groups)
        .where(and(isNull(groups.parentUid), or(eq(groups.uid, organization), eq(groups.name, organization))))
        .limit(3);
      // By uid, or by a name no other organization has.
      const byUid = orgs.find((o) => o.uid === organization);
      const groupUid = byUid?.uid ?? (orgs.length === 1 ? orgs[0]!.uid : undefined);
      if (!groupUid) return { groupUid: undefined, repoName, repo: undefined };
      const [repo] = await db
        .select({ uid: repos.uid, public: repos.public })
        .from(repos)
        .where(and(eq(repos.groupUid, groupUid), eq(repos.name, repoName)));
      return { groupUid, repoName, repo };
    },

    /** The size of a blob linked to the repo, or undefined. */
    async linkedBlob(repoUid: string, digest: string): Promise<number | undefined> {
      const [row] = await db
        .select({ size: repoBlobs.size })
        .from(repoBlobs)
        .where(and(eq(repoBlobs.repoUid, repoUid), eq(repoBlobs.digest, digest)));
      return row?.size;
    },

    /** Which of `digests` are linked to the repo. */
    async linkedAmong(repoUid: string, digests: readonly string[]): Promise<Set<string>> {
      if (digests.length === 0) return new Set();
      const rows = await db
        .select({ digest: repoBlobs.digest })
        .from(repoBlobs)
        .where(and(eq(repoBlobs.repoUid, repoUid), inArray(repoBlobs.digest, [...digests])));
      return new Set(rows.map((r) => r.digest));
    },

    /** Links a blob to the repo; false when it was linked already. */
    async link(repoUid: string, digest: string, size: number): Promise<boolean> {
      const made = await db.insert(repoBlobs).values({ repoUid, digest, size }).onConflictDoNothing().returning({ digest: repoBlobs.digest });
      return made.length > 0;
    },

    /** Unlinks a blob from the repo; false when it was not linked. */
    async unlink(repoUid: string, digest: string): Promise<boolean> {
      const gone = await db
        .delete(repoBlobs)
        .where(and(eq(repoBlobs.repoUid, repoUid), eq(repoBlobs.digest, digest)))
        .returning({ digest: repoBlobs.digest });
      return gone.length > 0;
    },

    async manifest(repoUid: string, digest: string): Promise<ManifestRow | undefined> {
      const [row] = await db
        .select()
        .from(manifests)
        .where(and(eq(manifests.repoUid, repoUid), eq(manifests.digest, digest)));
      return row;
    },

    /** Which of `digests` are manifests of the repo. */
    async manifestsAmong(repoUid: string, digests: readonly string[]): Promise<Set<string>> {
      if (digests.length === 0) return new Set();
      const rows = await db
        .select({ digest: manifests.digest })
        .from(manifests)
        .where(and(eq(manifests.repoUid, repoUid), inArray(manifests.digest, [...digests])));
      return new Set(rows.map((r) => r.digest));
    },

    async putManifest(repoUid: string, m: ManifestPut): Promise<void> {
      await db
        .insert(manifests)
        .values({ repoUid, ...m })
        .onConflictDoUpdate({
          target: [manifests.repoUid, manifests.digest],
          set: {
            mediaType: m.mediaType,
            isIndex: m.isIndex,
            platform: m.platform ?? null,
            size: m.size ?? null,
            children: m.children ?? null,
            manifestSize: m.manifestSize ?? 0n,
            subject: m.subject ?? null,
            artifactType: m.artifactType ?? null,
            annotations: m.annotations ?? null,
          },
        });
    },

    /** Deletes the manifest and the tags pointing at it; false when the repo had no such manifest. */
    async deleteManifest(repoUid: string, digest: string): Promise<boolean> {
      await db.delete(tags).where(and(eq(tags.repoUid, repoUid), eq(tags.digest, digest)));
      const gone = await db
        .delete(manifests)
        .where(and(eq(manifests.repoUid, repoUid), eq(manifests.digest, digest)))
        .returning({ digest: manifests.digest });
      return gone.length > 0;
    },

    async tagDigest(repoUid: string, name: string): Promise<string | undefined> {
      const [row] = await db
        .select({ digest: tags.digest })
        .from(tags)
        .where(and(eq(tags.repoUid, repoUid), eq(tags.name, name)));
      return row?.digest;
    },

    /** Points the tag at `digest` (created, or moved); the digest it pointed at before, if any. */
    async setTag(repoUid: string, name: string, digest: string): Promise<string | undefined> {
      const [before] = await db
        .select({ digest: tags.digest })
        .from(tags)
        .where(and(eq(tags.repoUid, repoUid), eq(tags.name, name)))
        .for("update");
      if (before?.digest === digest) return before.digest;
      await db
        .insert(tags)
        .values({ uid: newChildUid(repoUid), repoUid, name, digest, kind: tagKindOf(name) })
        .onConflictDoUpdate({ target: [tags.repoUid, tags.name], set: { digest, updateTime: sql`now()` } });
      return before?.digest;
    },

    async deleteTag(repoUid: string, name: string): Promise<boolean> {
      const gone = await db
        .delete(tags)
        .where(and(eq(tags.repoUid, repoUid), eq(tags.name, name)))
        .returning({ uid: tags.uid });
      return gone.length > 0;
    },

    /** Up to `limit` tag names after `last`, in byte order. */
    async tagNames(repoUid: string, limit: number, last: string | undefined): Promise<string[]> {
      const rows = await db
        .select({ name: tags.name })
        .from(tags)
        .where(and(eq(tags.repoUid, repoUid), last === undefined ? undefined : gt(sql`${tags.name} collate "C"`, last)))
        .orderBy(asc(sql`${tags.name} collate "C"`))
        .limit(limit);
      return rows.map((r) => r.name);
    },

    /** The manifests of the repo whose subject is `digest`. */
    referrers(repoUid: string, digest: string, artifactType: string | undefined) {
      return db
        .select({
          digest: manifests.digest,
          mediaType: manifests.mediaType,
          size: manifests.manifestSize,
          artifactType: manifests.artifactType,
          annotations: manifests.annotations,
        })
        .from(manifests)
        .where(and(eq(manifests.repoUid, repoUid), eq(manifests.subject, digest), artifactType === undefined ? undefined : eq(manifests.artifactType, artifactType)))
        .orderBy(asc(manifests.digest));
    },

    /** Records a push or pull event in the outbox (delivered to the repo's group's subscriptions). */
    recordEvent(type: typeof PUSH_EVENT | typeof PULL_EVENT, repo: { uid: string; groupUid: string }, actor: string, body: RegistryEventBody): Promise<void> {
      return recordEvents(db, [registryEvent(type, repo, actor, body)]);
    },
  };
}
