// How every table would be placed on a distributed PostgreSQL in Citus's model (docs/sharding.md): the one
// source of truth that test/unit/distribution.test.ts holds against the schema (every table classified, every
// organization column a real column, every foreign key between tenant tables either inside one organization
// or declared as crossing) and test/integration/shard-statements.test.ts against the statements the hot calls
// send (no join across organizations that is not declared here).
//
// - tenant: the table's rows belong to one organization (a root group). It would be a distributed table,
//   distributed by a stored `org` column (the root group's uid) and co-located with every other tenant table.
//   `org` lists the columns that give the organization today: the first is the one the stored column would be
//   filled from. A column of the `uid` domain gives it as its first uid segment (uids are hierarchical,
//   `<root group>/<hex>/...`, kernel/uidp.ts); a column of another domain (an outbox event id) names a row of
//   a tenant table that carries it. Two rows whose organization columns of one domain hold equal values are of
//   one organization, so a join on such columns stays on one shard.
// - reference: global data, the same for every organization (advisories, libraries, OSV records, built-in
//   roles): a reference table, copied to every node, joined locally with any tenant table.
// - local: operational state of the servers themselves, never joined with another table: a table left on the
//   coordinator only.
//
// `crossOrg` names the columns of a tenant table that may point at a row of another organization (a person's
// identity lives at the root, outside every organization, and is bound in many): a join over one of them
// leaves the shard. Each says why, and docs/sharding.md says what would change.

/** What the values of an organization column are: uids (the organization is the first segment) or the key of one table. */
export type OrgDomain = "uid" | "outbox_events.id";

export interface OrgColumn {
  column: string;
  domain: OrgDomain;
}

export type TableDistribution =
  | { kind: "tenant"; org: readonly OrgColumn[]; crossOrg?: Readonly<Record<string, string>>; note?: string }
  | {
      kind: "reference";
      why: string;
      /** Foreign keys into a tenant table that the distributed layout must give up (Citus keeps none from a reference table), and why that is safe. */
      dropForeignKeys?: Readonly<Record<string, string>>;
    }
  | { kind: "local"; why: string };

const uid = (...columns: string[]): OrgColumn[] => columns.map((column) => ({ column, domain: "uid" }));
const event = (column: string): OrgColumn => ({ column, domain: "outbox_events.id" });

const PERSON = "a root-level identity (a person, 40 hex with no parent) belongs to no organization and is bound, invited or asking in many";

/** Every table of the schema, by its SQL name. */
export const DISTRIBUTION: Readonly<Record<string, TableDistribution>> = {
  // IAM
  groups: { kind: "tenant", org: uid("uid", "parent_uid") },
  identities: {
    kind: "tenant",
    org: uid("uid", "parent_uid", "identity_provider_uid"),
    note: "a root-level identity is its own shard key (its uid has one segment): a one-person tenant",
  },
  roles: {
    kind: "reference",
    why: "built-in roles are global and bound in every organization; custom roles are few and rarely written (a write reaches every node)",
    dropForeignKeys: {
      parent_uid: "a custom role's group: deleting a group would check for its custom roles in the statement (as for any non-empty group) instead",
    },
  },
  role_bindings: { kind: "tenant", org: uid("uid", "group_uid", "mapping_uid"), crossOrg: { identity_uid: PERSON } },
  identity_providers: { kind: "tenant", org: uid("uid", "group_uid") },
  external_group_role_mappings: { kind: "tenant", org: uid("uid", "identity_provider_uid", "scope") },
  account_associations: { kind: "tenant", org: uid("uid") },
  terms_acceptances: { kind: "tenant", org: uid("org_uid", "uid") },
  group_access_requests: { kind: "tenant", org: uid("uid", "group_uid"), crossOrg: { identity_uid: PERSON } },
  group_invites: { kind: "tenant", org: uid("uid", "group_uid"), crossOrg: { creator_uid: PERSON } },
  refresh_tokens: { kind: "tenant", org: uid("identity_uid"), note: "co-located with its identity (a person's tokens on the person's shard)" },
  signing_keys: { kind: "local", why: "this server's own token keys: read whole at start and on rotation, never joined" },
  server_secrets: { kind: "local", why: "server-wide secrets read at start, never joined" },
  read_positions: { kind: "local", why: "read-your-writes marks of the primary (unlogged, read by key, never joined): the coordinator's own" },
  // Registry
  repos: { kind: "tenant", org: uid("uid", "group_uid") },
  tags: { kind: "tenant", org: uid("uid", "repo_uid") },
  tag_counts: { kind: "tenant", org: uid("repo_uid") },
  manifests: { kind: "tenant", org: uid("repo_uid") },
  repo_blobs: { kind: "tenant", org: uid("repo_uid") },
  // Events
  outbox_events: {
    kind: "tenant",
    org: [...uid("group_uid"), event("id")],
    note: "an event outside every group (a root identity's own metadata) has an empty group: the '' tenant",
  },
  subscriptions: { kind: "tenant", org: uid("uid", "group_uid") },
  event_deliveries: { kind: "tenant", org: [...uid("subscription_uid"), event("event_id")] },
  event_expansions: { kind: "tenant", org: [event("event_id")], note: "no uid column: the organization is its outbox event's (needs a stored org column)" },
  // Global data, written by the import commands only
  advisory_documents: { kind: "reference", why: "advisory data is global, written only by the importer" },
  advisories: { kind: "reference", why: "advisory data is global, written only by the importer" },
  advisory_aliases: { kind: "reference", why: "the advisories' aliases, kept by triggers on advisories: global like them" },
  advisory_events: { kind: "reference", why: "advisory data is global, written only by the importer" },
  osv_records: { kind: "reference", why: "OSV records are global, written only by the importer" },
  library_artifacts: { kind: "reference", why: "library data is global, written only by the importer" },
  library_artifact_versions: { kind: "reference", why: "library data is global, written only by the importer" },
};
