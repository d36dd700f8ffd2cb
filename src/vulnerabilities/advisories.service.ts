// AdvisoriesService: the vulnerability advisories of the distribution's packages, read-only global data written
// by the import-advisories command (import.ts). A caller needs CAP_ADVISORIES_LIST on some group, checked
// first: GetAdvisory's rule names its uid as the scope, but an advisory belongs to no group, so the auth
// interceptor treats this service as global data (its proto option apiserver.options.v1.global_data) and the
// handler checks the capability anywhere, as for ListAdvisories.
//
// Decisions where the contract is silent:
// - Default order uid (`<package>:<advisory id>`: by package, then advisory id); order_by also takes
//   advisory_id, artifact_name, create_time, update_time.
// - uidp: advisory uids have no `/` (they are roots; their events are their children). ids = exact uids;
//   in_root selects every advisory; descendants_of and children_of select none; ancestors_of an event uid
//   selects its advisory.
// - legacy_advisory_ids: the documents carry no legacy ids, so a non-empty list matches nothing. origin: the
//   documents do not say where an advisory came from, so a non-empty origin matches nothing.
// - Event filters select the advisories having at least one event with one of the values; exclude_event_authors
//   the advisories with no event by any of them. Imported events are REVIEW_STATE_APPROVED with author and
//   reviewer "" (the format names neither).
// - Every repeated filter takes at most 1,000 values; enum filters refuse UNSPECIFIED and unknown numbers
//   (INVALID_ARGUMENT naming `event_types[1]`); query is trimmed and at most 256 characters.
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  AdvisoriesService,
  AdvisorySchema,
  EventTypeFilter,
  ListAdvisoriesResponseSchema,
  ReviewState,
  type ListAdvisoriesRequest,
} from "../../gen/chainguard/platform/vulnerabilities/v2/advisories_pb.js";
import { requireRuleAnywhere } from "../kernel/auth/index.js";
import { invalidArgument, notFound, type FieldViolation } from "../kernel/errors/index.js";
import { defineListSpec, pageFields } from "../kernel/list/index.js";
import { UID_MAX_LENGTH, UIDP_MAX_IDS } from "../kernel/uidp.js";
import { bindService, type StoreDeps, type ServiceBinding } from "../kernel/module.js";
import { storeFactory } from "../kernel/unit-of-work.js";
import { toAdvisory } from "./advisories.mapper.js";
import { createAdvisoryStore, type AdvisoryFilter } from "./advisories.store.js";

export const advisoryList = defineListSpec({
  name: "vulnerabilities.v2.ListAdvisories",
  message: AdvisorySchema,
  orderBy: ["advisory_id", "artifact_name", "create_time", "update_time"],
  defaultOrder: "uid",
});

/** The most values one repeated filter takes. */
const MAX_FILTER_VALUES = 1000;
const MAX_QUERY_LENGTH = 256;
const MAX_VALUE_LENGTH = 1024;

const reviewStates = new Set<number>(Object.values(ReviewState).filter((v): v is number => typeof v === "number" && v !== ReviewState.UNSPECIFIED));
const eventTypeFilters = new Set<number>(Object.values(EventTypeFilter).filter((v): v is number => typeof v === "number" && v !== EventTypeFilter.UNSPECIFIED));

/** Validates the request's filters into the store's form; INVALID_ARGUMENT names every bad field at once. */
function advisoryFilterOf(req: ListAdvisoriesRequest): AdvisoryFilter {
  const violations: FieldViolation[] = [];
  const strings = (field: string, values: readonly string[]): string[] => {
    if (values.length > MAX_FILTER_VALUES) violations.push({ field, description: `at most ${MAX_FILTER_VALUES} values may be given, not ${values.length}` });
    else {
      const i = values.findIndex((v) => v.length > MAX_VALUE_LENGTH);
      if (i >= 0) violations.push({ field: `${field}[${i}]`, description: `longer than ${MAX_VALUE_LENGTH} characters` });
    }
    return [...new Set(values)];
  };
  const enums = (field: string, values: readonly number[], known: ReadonlySet<number>, name: string): number[] => {
    if (values.length > MAX_FILTER_VALUES) violations.push({ field, description: `at most ${MAX_FILTER_VALUES} values may be given, not ${values.length}` });
    else {
      const i = values.findIndex((v) => !known.has(v));
      if (i >= 0) violations.push({ field: `${field}[${i}]`, description: `${values[i]} is not a ${name} (UNSPECIFIED is not one either)` });
    }
    return [...new Set(values)];
  };

  const f: AdvisoryFilter = {
    advisoryIds: strings("advisory_ids", req.advisoryIds),
    artifactNames: strings("artifact_names", req.artifactNames),
    artifactTypes: strings("artifact_types", req.artifactTypes),
    artifactArchitectures: strings("artifact_architectures", req.artifactArchitectures),
    componentNames: strings("component_names", req.componentNames),
    componentTypes: strings("component_types", req.componentTypes),
    componentLocations: strings("component_locations", req.componentLocations),
    aliases: strings("aliases", req.aliases),
    eventReviewStates: enums("event_review_states", req.eventReviewStates, reviewStates, "ReviewState"),
    eventAuthors: strings("event_authors", req.eventAuthors),
    excludeEventAuthors: strings("exclude_event_authors", req.excludeEventAuthors),
    eventReviewers: strings("event_reviewers", req.eventReviewers),
    eventTypes: enums("event_types", req.eventTypes, eventTypeFilters, "EventTypeFilter"),
    query: req.query.trim(),
  };
  const legacy = strings("legacy_advisory_ids", req.legacyAdvisoryIds);
  if (req.latestEventType !== undefined) {
    if (!eventTypeFilters.has(req.latestEventType)) {
      violations.push({ field: "latest_event_type", description: `${req.latestEventType} is not an EventTypeFilter (UNSPECIFIED is not one either)` });
    } else f.latestEventType = req.latestEventType;
  }
  if (f.query.length > MAX_QUERY_LENGTH) violations.push({ field: "query", description: `at most ${MAX_QUERY_LENGTH} characters` });

  const uidp = req.uidp;
  if (uidp) {
    for (const [field, value] of [
      ["ancestors_of", uidp.ancestorsOf],
      ["descendants_of", uidp.descendantsOf],
      ["children_of", uidp.childrenOf],
    ] as const) {
      if (value.length > UID_MAX_LENGTH) violations.push({ field: `uidp.${field}`, description: `longer than ${UID_MAX_LENGTH} characters` });
    }
    if (uidp.ids.length > UIDP_MAX_IDS) violations.push({ field: "uidp.ids", description: `at most ${UIDP_MAX_IDS} ids may be given` });
    if (uidp.ids.length > 0) f.uids = [...new Set(uidp.ids)];
    if (uidp.ancestorsOf) f.ancestorsOf = uidp.ancestorsOf;
    // Advisories are roots (no `/` in their uid): nothing is a descendant or a child of anything here.
    if (uidp.descendantsOf || uidp.childrenOf) f.none = true;
  }
  if (legacy.length > 0 || (req.origin !== undefined && req.origin !== "")) f.none = true;
  if (violations.length > 0) throw invalidArgument(violations);
  return f;
}

export function advisoriesBindings(deps: StoreDeps): ServiceBinding[] {
  // Global data, read outside any unit of work: the store over the database the call's reads go to (a
  // replica's when replicas are configured, kernel/unit-of-work.ts storeFactory).
  const store = storeFactory(deps.db, createAdvisoryStore);

  const impl: ServiceImpl<typeof AdvisoriesService> = {
    async getAdvisory(req, ctx) {
      await requireRuleAnywhere(ctx);
      if (req.uid === "") throw invalidArgument({ field: "uid", description: "is required" });
      if (req.uid.length > UID_MAX_LENGTH) throw invalidArgument({ field: "uid", description: `longer than ${UID_MAX_LENGTH} characters` });
      const found = await store(ctx).find(req.uid);
      if (!found) throw notFound(AdvisorySchema.typeName, req.uid);
      return toAdvisory(found);
    },

    async listAdvisories(req, ctx) {
      await requireRuleAnywhere(ctx);
      const filter = advisoryFilterOf(req);
      const plan = deps.lists.plan(req, advisoryList, []);
      const page = await store(ctx).list(plan, filter);
      return create(ListAdvisoriesResponseSchema, { advisories: page.rows.map(toAdvisory), ...pageFields(page) });
    },
  };
  return [bindService(AdvisoriesService, impl)];
}
