// The distribution of every table (src/db/schema/distribution.ts, docs/sharding.md) held against the schema,
// and the statement checker (test/support/shard-check.ts) held against statements whose answer is known,
// bad ones included: a checker that passes everything would pass these schema checks too.
import { foreignKey, pgTable, text } from "drizzle-orm/pg-core";
import { describe, expect, it } from "vitest";
import { DISTRIBUTION } from "../../src/db/schema/distribution.js";
import { uidText } from "../../src/db/schema/columns.js";
import { repos } from "../../src/db/schema/index.js";
import { checkSchema, checkStatement, schemaTableObjects } from "../support/shard-check.js";

describe("the distribution of the schema", () => {
  it("classifies every table, names real organization columns, and keeps foreign keys within an organization unless declared", () => {
    expect(checkSchema(schemaTableObjects(), DISTRIBUTION)).toEqual([]);
  });

  it("rejects a table it does not classify", () => {
    const widgets = pgTable("widgets", { uid: uidText("uid").primaryKey() });
    expect(checkSchema([...schemaTableObjects(), widgets], DISTRIBUTION)).toEqual([
      expect.stringContaining("widgets is not classified"),
    ]);
  });

  it("rejects a tenant table without an organization column, or with one that is not a column", () => {
    const widgets = pgTable("widgets", { uid: uidText("uid").primaryKey(), name: text("name") });
    const none = { ...DISTRIBUTION, widgets: { kind: "tenant" as const, org: [] } };
    expect(checkSchema([...schemaTableObjects(), widgets], none)).toEqual([expect.stringContaining("widgets is a tenant table with no organization column")]);
    const wrong = { ...DISTRIBUTION, widgets: { kind: "tenant" as const, org: [{ column: "group_uid", domain: "uid" as const }] } };
    expect(checkSchema([...schemaTableObjects(), widgets], wrong)).toEqual([expect.stringContaining("organization column group_uid is not a column")]);
    const nullable = { ...DISTRIBUTION, widgets: { kind: "tenant" as const, org: [{ column: "name", domain: "uid" as const }] } };
    expect(checkSchema([...schemaTableObjects(), widgets], nullable)).toEqual([expect.stringContaining("organization column name may be null")]);
  });

  it("rejects a foreign key into another organization that is not declared, and one from a reference table to a tenant table", () => {
    const widgets = pgTable(
      "widgets",
      { uid: uidText("uid").primaryKey(), repoName: text("repo_name").notNull() },
      (t) => [foreignKey({ columns: [t.repoName], foreignColumns: [repos.name] })],
    );
    const tenant = { ...DISTRIBUTION, widgets: { kind: "tenant" as const, org: [{ column: "uid", domain: "uid" as const }] } };
    expect(checkSchema([...schemaTableObjects(), widgets], tenant)).toEqual([expect.stringContaining("may point into another organization")]);
    const declared = { ...DISTRIBUTION, widgets: { ...tenant.widgets, crossOrg: { repo_name: "a name is global" } } };
    expect(checkSchema([...schemaTableObjects(), widgets], declared)).toEqual([]);
    const reference = { ...DISTRIBUTION, widgets: { kind: "reference" as const, why: "global" } };
    expect(checkSchema([...schemaTableObjects(), widgets], reference)).toEqual([expect.stringContaining("a reference table cannot reference a distributed one")]);
  });
});

describe("the statement checker", () => {
  it("runs a join on the uid hierarchy pinned to one value on one shard", async () => {
    const v = await checkStatement(
      `select "tags"."name" from "tags" inner join "repos" on "repos"."uid" = "tags"."repo_uid" where "repos"."uid" = $1 and "tags"."kind" = $2`,
    );
    expect(v).toMatchObject({ shards: "router", problems: [], crossings: [], tables: ["tags", "repos"] });
  });

  it("pins by a uid prefix, and spreads an unpinned scan over every shard", async () => {
    expect((await checkStatement(`select "uid" from "repos" where "uid" like $1 escape '\\' order by "uid" limit 51`)).shards).toBe("router");
    const scan = await checkStatement(`select "event_id" from "event_deliveries" where "state" = 'pending' and "next_attempt_time" <= now() for update skip locked`);
    expect(scan).toMatchObject({ shards: "multi-shard", problems: [], locks: true });
  });

  it("rejects a join that is not on an organization column", async () => {
    const v = await checkStatement(`select "tags"."uid" from "tags" inner join "repos" on "repos"."name" = "tags"."name" where "repos"."uid" = $1`);
    expect(v.problems).toEqual([expect.stringContaining("joins rows of different organizations: tags | repos")]);
  });

  it("rejects a join under OR or without any condition (nothing ties the two)", async () => {
    const or = await checkStatement(`select 1 from "repos" r, "subscriptions" s where r."uid" = $1 or s."group_uid" = r."group_uid"`);
    expect(or.problems).toHaveLength(1);
    const bare = await checkStatement(`select 1 from "repos" r cross join "subscriptions" s where r."uid" = $1 and s."uid" = $2`);
    expect(bare.problems).toEqual([expect.stringContaining("not tied by an organization column")]);
  });

  it("ties a semi-join (IN subquery), an INSERT ... SELECT by position, and a correlated EXISTS", async () => {
    const semi = await checkStatement(`select "uid" from "repos" where "group_uid" = $1 and "uid" in (select "repo_uid" from "tags" where "digest" = $2)`);
    expect(semi).toMatchObject({ shards: "router", problems: [] });
    const fanOut = await checkStatement(
      `insert into "event_deliveries" ("event_id", "subscription_uid") select $1, s."uid" from "subscriptions" s where s."group_uid" in ($2, $3)`,
    );
    expect(fanOut).toMatchObject({ shards: "router", problems: [] });
    const badInsert = await checkStatement(`insert into "event_deliveries" ("event_id", "subscription_uid") select o."id", s."uid" from "outbox_events" o, "subscriptions" s`);
    expect(badInsert.problems).toEqual([expect.stringContaining("inserts into event_deliveries a row made of rows of different organizations")]);
    const exists = await checkStatement(`select g."uid" from "groups" g where g."uid" = $1 and not exists (select 1 from "repos" r where r."group_uid" = g."uid")`);
    expect(exists).toMatchObject({ shards: "router", problems: [] });
  });

  it("reports a join over a declared crossing as cross-shard, not as a problem", async () => {
    const v = await checkStatement(
      `select "roles"."capabilities" from "identities" left join "role_bindings" on "role_bindings"."identity_uid" = "identities"."uid" left join "roles" on "roles"."uid" = "role_bindings"."role_uid" where "identities"."uid" = $1`,
    );
    expect(v).toMatchObject({ shards: "cross-shard", crossings: ["role_bindings.identity_uid"], problems: [] });
  });

  it("fails the grants lookup once its crossing is no longer declared", async () => {
    const grants = `select "roles"."capabilities" from "identities" left join "role_bindings" on "role_bindings"."identity_uid" = "identities"."uid" left join "roles" on "roles"."uid" = "role_bindings"."role_uid" where "identities"."uid" = $1`;
    const undeclared = { ...DISTRIBUTION, role_bindings: { kind: "tenant" as const, org: [{ column: "group_uid", domain: "uid" as const }] } };
    expect((await checkStatement(grants, undeclared)).problems).toEqual([expect.stringContaining("identities | role_bindings")]);
  });

  it("plans an uncorrelated subquery and each side of a UNION apart, but joins a correlated one", async () => {
    const total = await checkStatement(
      `select "uid", ((select count(*) from "tags" where "tags"."repo_uid" = $1))::text as "total" from "repos" where "repos"."group_uid" = $2`,
    );
    expect(total).toMatchObject({ shards: "router", problems: [] });
    const union = await checkStatement(`select digest from repo_blobs where digest = $1 union select digest from manifests where digest = $1`);
    expect(union).toMatchObject({ shards: "multi-shard", problems: [] });
    const correlated = await checkStatement(`select r."uid" from "repos" r where r."uid" = $1 and exists (select 1 from "tags" t where t."name" = r."name")`);
    expect(correlated.problems).toEqual([expect.stringContaining("joins rows of different organizations")]);
  });

  it("follows a CTE's RETURNING into the statement that joins it, and a lineage (uid_lineage) as one organization", async () => {
    const v = await checkStatement(`
      with done as (delete from event_expansions x where x.event_id = any (array(select event_id from event_expansions limit 10)) returning x.event_id)
      insert into event_deliveries (event_id, subscription_uid)
      select e.id, s.uid from done d join outbox_events e on e.id = d.event_id join subscriptions s on s.group_uid = any (uid_lineage(e.group_uid))`);
    expect(v).toMatchObject({ shards: "multi-shard", problems: [] });
    const unrelated = await checkStatement(`
      with done as (delete from event_expansions x where x.event_id = $1 returning x.create_time)
      select s.uid from done d join subscriptions s on s.create_time = d.create_time`);
    expect(unrelated.problems).toEqual([expect.stringContaining("joins rows of different organizations")]);
  });

  it("rejects a table that is not classified, and a local table joined with another", async () => {
    expect((await checkStatement(`select 1 from "widgets" w join "repos" r on r."uid" = w."uid"`)).problems).toContainEqual(
      expect.stringContaining("table widgets is not classified"),
    );
    expect((await checkStatement(`select 1 from "signing_keys" k join "advisories" a on a."uid" = k."kid"`)).problems).toEqual([
      expect.stringContaining("local table signing_keys is used together with other tables"),
    ]);
  });

  it("joins reference tables with anything, and names none of a CTE as a table", async () => {
    const v = await checkStatement(
      `with picked as (select "uid" from "repos" where "uid" = $1) select t."uid", r."name" from "tags" t join picked p on p."uid" = t."repo_uid" join "roles" r on r."uid" = $2 where t."repo_uid" = $1`,
    );
    expect(v).toMatchObject({ shards: "router", problems: [] });
    expect(v.tables).toEqual(["repos", "tags", "roles"]);
    expect((await checkStatement(`select * from "advisories" a join "advisory_events" e on e."advisory_uid" = a."uid"`)).shards).toBe("reference");
  });
});
