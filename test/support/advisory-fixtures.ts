// Advisory documents written straight into the advisory tables (src/db/schema/advisories.ts), in the shape the
// YAML importer writes them: advisory uid `<package>:<advisory id>`, event uid `<advisory uid>/<ordinal>`,
// event type the EventTypeFilter number, data as in the file, imported events approved. For tests and benches
// of the readers, independent of the importer.
import { advisories, advisoryDocuments, advisoryEvents } from "../../src/db/schema/index.js";
import type { Executor } from "../../src/kernel/store.js";
import type { AdvisoryFilter } from "../../src/vulnerabilities/advisories.store.js";

/** chainguard.platform.vulnerabilities.v2.EventTypeFilter */
export const EventType = {
  DETECTION: 1,
  TRUE_POSITIVE_DETERMINATION: 2,
  FIXED: 3,
  FALSE_POSITIVE_DETERMINATION: 4,
  ANALYSIS_NOT_PLANNED: 5,
  FIX_NOT_PLANNED: 6,
  PENDING_UPSTREAM_FIX: 7,
  PATCHED: 8,
} as const;

const REVIEW_STATE_APPROVED = 2;

export interface FixtureEvent {
  time: string;
  type: number;
  data?: Record<string, unknown>;
}

export interface FixtureAdvisory {
  id: string;
  aliases?: string[];
  events?: FixtureEvent[];
}

export async function writeAdvisoryDocument(db: Executor, packageName: string, list: readonly FixtureAdvisory[]): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.insert(advisoryDocuments).values({ package: packageName, schemaVersion: "2.0.2", source: `${packageName}.advisories.yaml`, contentHash: "fixture" });
    for (const a of list) {
      const uid = `${packageName}:${a.id}`;
      const events = a.events ?? [];
      await tx.insert(advisories).values({
        uid,
        package: packageName,
        advisoryId: a.id,
        aliases: a.aliases ?? [],
        latestEventType: events[events.length - 1]?.type ?? 0,
        ...(events.length > 0 ? { createTime: new Date(events[0]!.time), updateTime: new Date(events[events.length - 1]!.time) } : {}),
      });
      if (events.length > 0) {
        await tx.insert(advisoryEvents).values(
          events.map((e, i) => ({ uid: `${uid}/${i}`, advisoryUid: uid, ordinal: i, time: new Date(e.time), type: e.type, reviewState: REVIEW_STATE_APPROVED, data: e.data ?? {} })),
        );
      }
    }
  });
}

/** A ListAdvisories filter (the store's, validated) that filters nothing but what `given` sets. */
export function advisoryFilter(given: Partial<AdvisoryFilter> = {}): AdvisoryFilter {
  return {
    advisoryIds: [],
    artifactNames: [],
    artifactTypes: [],
    artifactArchitectures: [],
    componentNames: [],
    componentTypes: [],
    componentLocations: [],
    aliases: [],
    eventReviewStates: [],
    eventAuthors: [],
    excludeEventAuthors: [],
    eventReviewers: [],
    eventTypes: [],
    query: "",
    ...given,
  };
}
