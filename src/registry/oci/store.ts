// The registry data plane's rows: which repo a /v2/ name is, the blobs linked to a repo (repo_blobs), the
// manifests and tags pushed (the same rows the OCI layout import writes, so ListTags, GetTag, GetSize and
// GetArchitectures show a push at once), the referrers of a manifest, and the push and pull events.
import { and, asc, eq, getTableColumns, gt, inArray, isNull, or, sql } from "drizzle-orm";
import { Audience } from "../../../gen/apiserver/options/v1/options_pb.js";
import { groups, manifests, repoBlobs, repos, tags, type ManifestRow } from "../../db/schema/index.js";
import type { OutboxEvent } from "../../kernel/outbox.js";
import { outboxInsert } from "../../kernel/unit-of-work.js";
import { executedRows, type Executor } from "../../kernel/store.js";
import { tagKindOf } from "../tag-kind.js";
import { newChildUid } from "../../kernel/uidp.js";
import { executeHot, hotStatement } from "../../kernel/prepared-rows.js";
import { splitName } from "./names.js";

export interface ResolvedName {
  /** The organization's root group, when the name's first segment is one. */
  groupUid: string | undefined;
  /** The repo's name within the organization. */
  repoName: string;
  repo: { uid: string; public: boolean } | undefined;
}

/**
 * A name's resolution with what a pull request reads next, fetched in the same statement: the size of the blob
 * linked to the repo (null: not linked), or the manifest a tag or digest names in it (null: none). Read only
 * once the caller is authorized: what the repo holds is not the caller's to know before.
 */
export interface ResolvedWith extends ResolvedName {
  blobSize?: number | null;
  manifest?: ManifestRow | null;
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

/**
 * Links a blob to a repo and records its push event, in one statement (one round trip, one commit: the link and
 * its event commit together); false when the blob was linked already (the event is recorded all the same: the
 * push happened).
 */
async function linkWithEvent(db: Executor, repoUid: string, digest: string, size: number, event: OutboxEvent): Promise<boolean> {
  const link = db.insert(repoBlobs).values({ repoUid, digest, size }).onConflictDoNothing().returning({ digest: repoBlobs.digest });
  const [row] = executedRows(await executeHot(db, sql`with linked as (${link.getSQL()}), recorded as (${outboxInsert(event)}) select count(*)::int as linked from linked`));
  return Number(row?.linked) > 0;
}

export function createOciStore(db: Executor) {
  // The statements every /v2/ request runs (a name's resolution, a blob's link, a manifest by tag or
  // digest), prepared on first use and run as named statements (kernel/prepared-rows.ts): a small pull or
  // push is a dozen requests of a few point reads each, where building each query and having PostgreSQL
  // parse and plan it again was much of the request's cost. The raw statements of a push's rows with its event
  // (linkPushed, mountPushed, putManifestPushed) and of a pull's event (recordPull) run named too (executeHot):
  // their text is the same on every call, every value a parameter (bench/LOG.md).
  let resolveStatement: ReturnType<typeof prepareResolve> | undefined;
  let linkedBlobStatement: ReturnType<typeof prepareLinkedBlob> | undefined;
  let manifestStatement: ReturnType<typeof prepareManifest> | undefined;
  let taggedManifestStatement: ReturnType<typeof prepareTaggedManifest> | undefined;
  let resolveBlobStatement: ReturnType<typeof prepareResolveBlob> | undefined;
  let resolveTaggedStatement: ReturnType<typeof prepareResolveTagged> | undefined;
  let resolveDigestStatement: ReturnType<typeof prepareResolveDigest> | undefined;

  /** The organizations the name's first segment names (by uid or by name): at most 3 are read. */
  const organizationIs = () =>
    and(isNull(groups.parentUid), or(eq(groups.uid, sql.placeholder("organization")), eq(groups.name, sql.placeholder("organization"))));
  const repoIn = () => and(eq(repos.groupUid, groups.uid), eq(repos.name, sql.placeholder("repoName")));
  const named = { groupUid: groups.uid, repoUid: repos.uid, public: repos.public };

  function prepareResolve() {
    // Each organization the name's first segment names (by uid or by name) with the repo of that name in it:
    // one row per organization (a repo's name is unique in its group).
    return hotStatement(
      db
        .select({ groupUid: groups.uid, repoUid: repos.uid, public: repos.public })
        .from(groups)
        .leftJoin(repos, and(eq(repos.groupUid, groups.uid), eq(repos.name, sql.placeholder("repoName"))))
        .where(organizationIs())
        .limit(3)
        .prepare("oci_resolve"),
    );
  }
  function prepareResolveBlob() {
    return hotStatement(
      db
        .select({ ...named, blobSize: repoBlobs.size })
        .from(groups)
        .leftJoin(repos, repoIn())
        .leftJoin(repoBlobs, and(eq(repoBlobs.repoUid, repos.uid), eq(repoBlobs.digest, sql.placeholder("digest"))))
        .where(organizationIs())
        .limit(3)
        .prepare("oci_resolve_blob"),
    );
  }
  function prepareResolveTagged() {
    return hotStatement(
      db
        .select({ ...named, manifest: getTableColumns(manifests) })
        .from(groups)
        .leftJoin(repos, repoIn())
        .leftJoin(tags, and(eq(tags.repoUid, repos.uid), eq(tags.name, sql.placeholder("tag"))))
        .leftJoin(manifests, and(eq(manifests.repoUid, repos.uid), eq(manifests.digest, tags.digest)))
        .where(organizationIs())
        .limit(3)
        .prepare("oci_resolve_tagged"),
    );
  }
  function prepareResolveDigest() {
    return hotStatement(
      db
        .select({ ...named, manifest: getTableColumns(manifests) })
        .from(groups)
        .leftJoin(repos, repoIn())
        .leftJoin(manifests, and(eq(manifests.repoUid, repos.uid), eq(manifests.digest, sql.placeholder("digest"))))
        .where(organizationIs())
        .limit(3)
        .prepare("oci_resolve_digest"),
    );
  }
  function prepareLinkedBlob() {
    return hotStatement(
      db
        .select({ size: repoBlobs.size })
        .from(repoBlobs)
        .where(and(eq(repoBlobs.repoUid, sql.placeholder("repoUid")), eq(repoBlobs.digest, sql.placeholder("digest"))))
        .prepare("oci_linked_blob"),
    );
  }
  function prepareManifest() {
    return hotStatement(
      db
        .select()
        .from(manifests)
        .where(and(eq(manifests.repoUid, sql.placeholder("repoUid")), eq(manifests.digest, sql.placeholder("digest"))))
        .prepare("oci_manifest"),
    );
  }
  function prepareTaggedManifest() {
    return hotStatement(
      db
        .select({ manifest: getTableColumns(manifests) })
        .from(tags)
        .innerJoin(manifests, and(eq(manifests.repoUid, tags.repoUid), eq(manifests.digest, tags.digest)))
        .where(and(eq(tags.repoUid, sql.placeholder("repoUid")), eq(tags.name, sql.placeholder("name"))))
        .prepare("oci_tagged_manifest"),
    );
  }

  return {
    /** The organization and repo a name points at (none may exist). */
    async resolve(name: string): Promise<ResolvedName> {
      const { organization, repo: repoName } = splitName(name);
      resolveStatement ??= prepareResolve();
      const rows = await resolveStatement.execute({ organization, repoName });
      // By uid, or by a name no other organization has.
      const row = rows.find((o) => o.groupUid === organization) ?? (rows.length === 1 ? rows[0] : undefined);
      if (!row) return { groupUid: undefined, repoName, repo: undefined };
      return { groupUid: row.groupUid, repoName, repo: row.repoUid === null ? undefined : { uid: row.repoUid, public: row.public! } };
    },

    /**
     * The name's resolution and, in the same round trip, the blob's link (`blob`: its digest) or the manifest
     * (`tag`, or `digest`) that a pull reads next.
     */
    async resolveWith(name: string, ask: { blob: string } | { tag: string } | { digest: string }): Promise<ResolvedWith> {
      const { organization, repo: repoName } = splitName(name);
      const pick = <R extends { groupUid: string; repoUid: string | null; public: boolean | null }>(rows: R[]) =>
        rows.find((o) => o.groupUid === organization) ?? (rows.length === 1 ? rows[0] : undefined);
      const base = (row: { groupUid: string; repoUid: string | null; public: boolean | null } | undefined): ResolvedName =>
        !row ? { groupUid: undefined, repoName, repo: undefined } : { groupUid: row.groupUid, repoName, repo: row.repoUid === null ? undefined : { uid: row.repoUid, public: row.public! } };
      if ("blob" in ask) {
        resolveBlobStatement ??= prepareResolveBlob();
        const row = pick(await resolveBlobStatement.execute({ organization, repoName, digest: ask.blob }));
        return { ...base(row), blobSize: row?.blobSize ?? null };
      }
      if ("tag" in ask) {
        resolveTaggedStatement ??= prepareResolveTagged();
        const row = pick(await resolveTaggedStatement.execute({ organization, repoName, tag: ask.tag }));
        return { ...base(row), manifest: row?.manifest ?? null };
      }
      resolveDigestStatement ??= prepareResolveDigest();
      const row = pick(await resolveDigestStatement.execute({ organization, repoName, digest: ask.digest }));
      return { ...base(row), manifest: row?.manifest ?? null };
    },

    /** The size of a blob linked to the repo, or undefined. */
    async linkedBlob(repoUid: string, digest: string): Promise<number | undefined> {
      linkedBlobStatement ??= prepareLinkedBlob();
      const [row] = await linkedBlobStatement.execute({ repoUid, digest });
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

    /** Links a blob to the repo with its push event, in one statement (linkWithEvent). */
    linkPushed(repoUid: string, digest: string, size: number, event: OutboxEvent): Promise<boolean> {
      return linkWithEvent(db, repoUid, digest, size, event);
    },

    /**
     * A cross-repository mount: links the blob `digest` that repo `from` links to the repo, and records its push
     * event, in one transaction (the link and its event commit together), when `from` links it; when it does
     * not, links nothing and records nothing, and resolves false. The event is recorded when the repo linked the
     * blob already, as linkPushed's is.
     *
     * The source's link is read and locked (FOR KEY SHARE) first, and stays locked until the transaction
     * commits, so a deletion of it (the blob deleted from `from`, or `from` deleted) waits for the mount: from
     * the moment the mount finds the source's link until its own is committed, some committed link references
     * the blob at every instant, and garbage collection, which removes only a blob it found referenced nowhere
     * right before (gc.ts), cannot remove it in between. A source's link deleted before is not found: nothing is
     * linked. Two statements, each about one repo's rows (the source's, then the target's link with its event):
     * on a database sharded by organization each stays on one shard (docs/sharding.md).
     */
    mountPushed(from: string, repoUid: string, digest: string, event: OutboxEvent): Promise<boolean> {
      const t = (col: { name: string }) => sql.identifier(col.name);
      return db.transaction(async (tx) => {
        const [source] = executedRows(
          await executeHot(tx, sql`select ${t(repoBlobs.size)} as size from ${repoBlobs} where ${t(repoBlobs.repoUid)} = ${from} and ${t(repoBlobs.digest)} = ${digest} for key share`),
        );
        if (!source) return false;
        await linkWithEvent(tx, repoUid, digest, Number(source.size), event);
        return true;
      });
    },

    /**
     * Records a pull's event in one statement whose commit does not wait for PostgreSQL's log to reach the disk
     * (synchronous_commit off for that statement's own transaction alone).
     */
    async recordPull(event: OutboxEvent): Promise<void> {
      await executeHot(db, sql`with relaxed as (select set_config('synchronous_commit', 'off', true)) ${outboxInsert(event, { from: sql`relaxed` })}`);
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
      manifestStatement ??= prepareManifest();
      const [row] = await manifestStatement.execute({ repoUid, digest });
      return row;
    },

    /** The manifest a tag of the repo points at, or undefined. */
    async taggedManifest(repoUid: string, name: string): Promise<ManifestRow | undefined> {
      taggedManifestStatement ??= prepareTaggedManifest();
      const [row] = await taggedManifestStatement.execute({ repoUid, name });
      return row?.manifest;
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

    /**
     * A manifest push's rows and event in one statement (one round trip, one commit): the manifest (created or
     * updated), the tag pointed at it (when pushed by tag; created or moved, and left alone when it points there
     * already), and the push event, whose body gets `tag_previous_digest` when the tag moved. The tag's row is
     * locked before it is read (FOR UPDATE): the tag's write and the event read it first, so the
     * lock always comes before the write. Resolves to the digest the tag pointed at before, if any.
     */
    async putManifestPushed(repoUid: string, m: ManifestPut, tag: string | undefined, event: OutboxEvent): Promise<string | undefined> {
      // The manifest's row, created or updated (a push of a manifest already stored refreshes what it says).
      const manifest = db
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
      if (tag === undefined) {
        await executeHot(db, sql`with stored as (${manifest.getSQL()}) ${outboxInsert(event)}`);
        return undefined;
      }
      const t = (col: { name: string }) => sql.identifier(col.name);
      const [row] = executedRows(
        await executeHot(db, sql`with stored as (${manifest.getSQL()}),
          previous as (select ${t(tags.digest)} as digest from ${tags} where ${t(tags.repoUid)} = ${repoUid} and ${t(tags.name)} = ${tag} for update),
          tagged as (
            insert into ${tags} (${t(tags.uid)}, ${t(tags.repoUid)}, ${t(tags.name)}, ${t(tags.digest)}, ${t(tags.kind)})
            select ${newChildUid(repoUid)}::text, ${repoUid}::text, ${tag}::text, ${m.digest}::text, ${tagKindOf(tag)}::smallint
            where not exists (select 1 from previous where digest = ${m.digest})
            on conflict (${t(tags.repoUid)}, ${t(tags.name)}) do update set ${t(tags.digest)} = excluded.${t(tags.digest)}, ${t(tags.updateTime)} = now()
          ),
          recorded as (${outboxInsert(event, { bodyMerge: sql`coalesce((select jsonb_build_object('tag_previous_digest', digest) from previous where digest <> ${m.digest}), '{}'::jsonb)` })})
          select (select digest from previous) as previous`),
      );
      return typeof row?.previous === "string" ? row.previous : undefined;
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

  };
}
