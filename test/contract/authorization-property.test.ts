// Authorization as a property, generated from the descriptors: two organizations, each with a resource of
// every type the server builds (groups, identities, roles, role bindings, repos, tags, event subscriptions),
// and callers of one (the attacker, A) aiming at the other (the victim, B). Nothing here names a method: the
// methods are those of the services the domain modules implement (src/modules.ts), their rules and scope field paths
// are read from the proto (apiserver.options.v1: auth, iam_scope), so a new method is covered without a new
// test.
//
//   1. Every scoped method (read, update, delete, create under a parent), its scope field set to each of B's
//      uids and to tricks made of them (uppercase hex, `..`, trailing segments, B nested under A, encoded `/`
//      in REST paths): PERMISSION_DENIED or NOT_FOUND (INVALID_ARGUMENT when the value is no valid uid, or
//      when it lies inside A, where the handler may check the rest of the request first); never success.
//   2. Every List: filters naming B (every uidp form, every other string filter), and B's own page tokens,
//      return nothing of B.
//   3. Every List, for every caller of A: each row returned, a Get of its uid by the same caller succeeds.
//   4. Lower roles never escalate: a caller cannot create a role, bind itself (or update its own binding) to a
//      role with capabilities it lacks where it would apply.
//   5. A uid of B in a body field (role bindings name identities and roles): refused, nothing echoed.
// In every answer, response or error, no text of B appears: B's names, descriptions, subjects and emails all
// carry a marker the test looks for.
import { create, ScalarType, toJsonString, type DescField, type DescMessage, type DescMethod, type DescMethodUnary } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Capability } from "../../gen/capabilities/capabilities_pb.js";
import { RoleBindingsService } from "../../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import { RolesService } from "../../gen/chainguard/platform/iam/v2/roles_pb.js";
import { ExternalGroupRoleMappingsService } from "../../gen/chainguard/platform/iam/v2/external_group_role_mappings_pb.js";
import {
  externalGroupRoleMappings,
  groupAccessRequests,
  identities,
  identityProviders,
  repos,
  roleBindings,
  roles,
  subscriptions,
  tags,
  termsAcceptances,
} from "../../src/db/schema/index.js";
import { managedRole, managedRoles } from "../../src/iam/managed-roles.js";
import { ruleOf } from "../../src/kernel/auth/index.js";
import { isGlobalData, registry, servedMethods } from "../../src/kernel/descriptors.js";
import { isValidUid, isWithin, newChildUid, newRootUid } from "../../src/kernel/uidp.js";
import { tagKindOf } from "../../src/registry/tag-kind.js";
import { implementedServices } from "../support/domains.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type Caller, type World } from "../support/world.js";
import { call, restRequestOf, type Outcome, type Protocol } from "./harness.js";

/** Every text of the victim organization carries this: an answer containing it leaked B's data. */
const MARK = "victimsecret";
const digest = `sha256:${"1".repeat(64)}`;

interface Org extends World {
  /** An identity created under team, with an email; a custom role on org; its binding on team. */
  member: string;
  role: string;
  binding: string;
  repo: string;
  tag: string;
  /** An event subscription on team (its sink carries the marker). */
  subscription: string;
  /** An identity provider on org, and a mapping of one of its groups (both carry the marker). */
  identityProvider: string;
  mapping: string;
  /** A resource uid of every type (groups, an identity, a custom role, role bindings, a repo, a tag, a subscription). */
  uids: string[];
}

async function seedOrg(server: TestServer, name: string, mark: string): Promise<Org> {
  const world = await seedWorld(server, `${name}${mark}`);
  const { db } = server.database;
  const member = newChildUid(world.team);
  await db.insert(identities).values({
    uid: member,
    parentUid: world.team,
    name: `member${mark}`,
    description: `member ${mark}`,
    email: `member.${mark}@example.test`,
    relationship: { claimMatch: { issuer: "https://issuer.test", subject: `member-${mark}-${member}` } },
    relationshipType: 1,
    issuer: "https://issuer.test",
    subject: `member-${mark}-${member}`,
  });
  const role = newChildUid(world.org);
  await db.insert(roles).values({ uid: role, parentUid: world.org, name: `reader${mark}`, description: `reader ${mark}`, capabilities: [Capability.CAP_REPO_LIST] });
  const binding = newChildUid(world.team);
  await db.insert(roleBindings).values({ uid: binding, groupUid: world.team, identityUid: member, roleUid: role });
  const repo = newChildUid(world.team);
  await db.insert(repos).values({ uid: repo, groupUid: world.team, name: `repo${mark}`, description: `repo ${mark}` });
  const tag = newChildUid(repo);
  await db.insert(tags).values({ uid: tag, repoUid: repo, name: `tag${mark}`, kind: tagKindOf(`tag${mark}`), digest });
  const subscription = newChildUid(world.team);
  await db.insert(subscriptions).values({ uid: subscription, groupUid: world.team, sink: `https://hooks.invalid/sink${mark}` });
  const identityProvider = newChildUid(world.org);
  await db.insert(identityProviders).values({
    uid: identityProvider,
    groupUid: world.org,
    name: `idp${mark}`,
    description: `idp ${mark}`,
    defaultRoleUid: managedRole("viewer").uid,
    oidcIssuer: `https://idp.test/${mark}`,
    oidcClientId: `client${mark}`,
  });
  const mapping = newChildUid(identityProvider);
  await db.insert(externalGroupRoleMappings).values({ uid: mapping, identityProviderUid: identityProvider, externalGroupId: `group${mark}`, roleUid: role, scope: world.org });
  // Terms accepted for the organization, and two pending access requests (one by a person whose name and
  // email carry the marker): enough rows for a second page.
  await db.insert(termsAcceptances).values(
    ["terms-of-service", "privacy-notice"].map((docId) => ({ uid: newChildUid(world.org), orgUid: world.org, docId, acceptedBy: world.identity.owner })),
  );
  const asker = newRootUid();
  await db.insert(identities).values({
    uid: asker,
    name: `asker${mark}`,
    email: `asker.${mark}@example.test`,
    relationship: { claimMatch: { issuer: "https://issuer.test", subject: `asker-${mark}-${asker}` } },
    relationshipType: 1,
    issuer: "https://issuer.test",
    subject: `asker-${mark}-${asker}`,
  });
  await db.insert(groupAccessRequests).values([
    { uid: newChildUid(world.team), groupUid: world.team, identityUid: asker },
    { uid: newChildUid(world.org), groupUid: world.org, identityUid: world.identity.stranger },
  ]);
  const seeded = await db.select({ uid: roleBindings.uid }).from(roleBindings).where(eq(roleBindings.groupUid, world.org));
  return {
    ...world,
    member,
    role,
    binding,
    repo,
    tag,
    subscription,
    identityProvider,
    mapping,
    uids: [world.org, world.team, member, role, binding, ...seeded.slice(0, 1).map((b) => b.uid), repo, tag, subscription, identityProvider, mapping],
  };
}

let server: TestServer;
let a: Org;
let b: Org;
/** A caller of A that may create roles and role bindings, with a custom role holding little else. */
const BINDER_CAPABILITIES = [
  Capability.CAP_IAM_ROLE_BINDINGS_CREATE,
  Capability.CAP_IAM_ROLE_BINDINGS_UPDATE,
  Capability.CAP_IAM_ROLE_BINDINGS_LIST,
  Capability.CAP_IAM_ROLES_CREATE,
  Capability.CAP_IAM_ROLES_LIST,
  Capability.CAP_REPO_LIST,
];
let binder: { identity: string; binding: string; auth: Record<string, string> };

beforeAll(async () => {
  server = await startTestServer();
  a = await seedOrg(server, "attacker", "");
  b = await seedOrg(server, "victim", MARK);
  const { db } = server.database;
  const identity = newRootUid();
  await db.insert(identities).values({
    uid: identity,
    parentUid: null,
    name: "binder",
    relationship: { claimMatch: { issuer: "https://issuer.test", subject: `binder-${identity}` } },
    relationshipType: 1,
    issuer: "https://issuer.test",
    subject: `binder-${identity}`,
  });
  const role = newChildUid(a.org);
  await db.insert(roles).values({ uid: role, parentUid: a.org, name: "binder", capabilities: BINDER_CAPABILITIES });
  const binding = newChildUid(a.org);
  await db.insert(roleBindings).values({ uid: binding, groupUid: a.org, identityUid: identity, roleUid: role });
  binder = { identity, binding, auth: { authorization: `Bearer ${await server.token(identity)}` } };
});
afterAll(async () => {
  await server?.close();
});

// ---- the methods, from the descriptors -------------------------------------------------------------------

const isUnary = (m: DescMethod): m is DescMethodUnary => m.methodKind === "unary";
/**
 * Services over global data (not per organization: the library artifacts, the advisories): no row belongs to
 * B, so there is nothing of B to reach; their authorization is in the matrix and their contract tests.
 */
const globalServices: ReadonlySet<string> = new Set([
  ...servedMethods.filter((m) => isGlobalData(m.parent)).map((m) => m.parent.typeName),
  // Advisory data; its one authenticated method reads B's registry only to check that a named repo is visible,
  // which security-advisory.contract.test.ts covers (NOT_FOUND for a repo of a group the caller cannot see).
  "chainguard.platform.advisory.v2.SecurityAdvisoryService",
]);
/** The unary methods of every service the server implements that holds per-organization data. */
function implementedMethods(): DescMethodUnary[] {
  const services = new Set(implementedServices().map((service) => service.typeName));
  return servedMethods.filter((m) => services.has(m.parent.typeName) && !globalServices.has(m.parent.typeName)).filter(isUnary);
}
const nameOf = (m: DescMethod) => `${m.parent.name}.${m.name}`;

/** A request init with the string at `path` set to `value` (nested messages created on the way). */
function withPath(path: readonly DescField[], value: string, base: Record<string, unknown> = {}): Record<string, unknown> {
  const out = { ...base };
  let at = out;
  path.forEach((f, i) => {
    if (i === path.length - 1) at[f.localName] = value;
    else at = at[f.localName] = { ...((at[f.localName] as object | undefined) ?? {}) };
  });
  return out;
}

/** The repeated message field of a List response (its rows). */
function rowsField(message: DescMessage): DescField | undefined {
  return message.fields.find((f) => f.fieldKind === "list" && f.listKind === "message");
}

// ---- outcomes ------------------------------------------------------------------------------------------------

type Got = Code | "OK";
const codeOf = (out: Outcome<DescMessage>): Got => (out.error ? out.error.code : "OK");
const show = (g: Got) => (g === "OK" ? "OK" : Code[g]);

/** The whole answer as text, for the marker check. */
function textOf(method: DescMethodUnary, out: Outcome<DescMessage>): string {
  if (out.error) return JSON.stringify({ message: out.error.message, details: out.error.details.map((d) => toJsonString(registry.getMessage(d.$typeName)!, d as never, { registry })) });
  return toJsonString(method.output, out.message as never, { registry });
}

/** Runs `tasks` with at most `n` at a time. */
async function pool<T>(n: number, tasks: Array<() => Promise<T>>): Promise<T[]> {
  const out: T[] = new Array(tasks.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < tasks.length) {
        const i = next++;
        out[i] = await tasks[i]!();
      }
    }),
  );
  return out;
}

/**
 * The tricks are sampled: every uid of B as is, plus SAMPLES (uid, trick) pairs per method drawn from a seeded
 * generator. The seed is printed with any finding; AUTHZ_SEED=<seed> replays a run.
 */
const SEED = Number(process.env.AUTHZ_SEED ?? Date.now() % 2 ** 31);
const SAMPLES = 12;
/** mulberry32: a small seeded generator, enough to pick cases. */
function generator(seed: number): () => number {
  let t = seed >>> 0;
  return () => {
    t = (t + 0x6d2b79f5) >>> 0;
    let r = Math.imul(t ^ (t >>> 15), 1 | t);
    r = (r + Math.imul(r ^ (r >>> 7), 61 | r)) ^ r;
    return ((r ^ (r >>> 14)) >>> 0) / 2 ** 32;
  };
}
function sample<T>(items: readonly T[], n: number, random: () => number): T[] {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [copy[i], copy[j]] = [copy[j]!, copy[i]!];
  }
  return copy.slice(0, n);
}

/** Collects failures instead of stopping at the first, so one run shows them all. */
class Findings {
  readonly list: string[] = [];
  add(what: string): void {
    this.list.push(what);
  }
  check(): void {
    expect(this.list.slice(0, 40), `${this.list.length} findings (AUTHZ_SEED=${SEED})`).toEqual([]);
  }
}

/** Long enough for a loaded CI machine: these tests make hundreds of calls each. */
const LONG = 300_000;

// ---- 1. scoped methods aimed at B -----------------------------------------------------------------------------

/** Values made of a uid of B that a scope check must not be fooled by, each with whether it lies inside A. */
function tricks(uid: string): Array<{ how: string; value: string }> {
  const last = uid.split("/").pop()!;
  return [
    { how: "as is", value: uid },
    { how: "uppercase hex", value: uid.toUpperCase() },
    { how: "trailing segment", value: `${uid}/0123456789abcdef` },
    { how: "trailing slash", value: `${uid}/` },
    { how: "dot-dot after", value: `${uid}/..` },
    { how: "dot-dot from A", value: `${a.org}/../${uid}` },
    { how: "nested under A", value: `${a.team}/${uid}` },
    { how: "last segment under A", value: `${a.team}/${last}` },
    { how: "percent-encoded slash", value: uid.replaceAll("/", "%2F") },
    { how: "surrounding space", value: ` ${uid} ` },
  ];
}

/** What a refused scoped call may answer for `value`. */
function refusals(value: string): Got[] {
  const ok: Got[] = [Code.PermissionDenied, Code.NotFound];
  if (!isValidUid(value) || isWithin(value, a.org)) ok.push(Code.InvalidArgument);
  return ok;
}

const attackers: readonly Caller[] = ["owner", "editor", "viewer", "confined"];

describe.each(["grpc", "rest"] as const satisfies readonly Protocol[])("a caller of A never reaches B [%s]", (protocol) => {
  it("every scoped method, its scope field set to every uid of B and every trick made of them", async () => {
    const findings = new Findings();
    const scoped = implementedMethods().flatMap((m) => {
      const rule = ruleOf(m);
      return rule.kind === "scoped" ? [{ method: m, path: rule.scopePath }] : [];
    });
    expect(scoped.length).toBeGreaterThan(10);
    const random = generator(SEED);
    const tasks = scoped.flatMap(({ method, path }) => {
      // Every uid as is, for every caller; sampled tricks for the owner (every other caller of A holds a
      // subset of the owner's capabilities there).
      const plain = b.uids.flatMap((uid) => attackers.map((caller) => ({ caller, how: "as is", value: uid })));
      const tricked = sample(
        b.uids.flatMap((uid) => tricks(uid).slice(1)),
        SAMPLES,
        random,
      ).map((t) => ({ caller: "owner" as Caller, ...t }));
      return [...plain, ...tricked].map(({ caller, how, value }) => async () => {
            const out = await call(protocol, server.baseUrl, method, withPath(path, value) as never, a.auth(caller));
            const got = codeOf(out);
            const what = `${nameOf(method)} ${path.map((f) => f.name).join(".")}=${how} ${value} as ${caller}: ${show(got)} ${out.error?.message ?? ""}`;
            if (!refusals(value).includes(got)) findings.add(what);
            if (textOf(method, out).includes(MARK)) findings.add(`leak: ${what}: ${textOf(method, out)}`);
      });
    });
    await pool(6, tasks);
    findings.check();
  }, LONG);

  if (protocol === "rest") {
    it("every scoped method with B's uid in its REST path, `/` encoded as %2F or %2f", async () => {
      const findings = new Findings();
      const scoped = implementedMethods().flatMap((m) => {
        const rule = ruleOf(m);
        return rule.kind === "scoped" ? [{ method: m, path: rule.scopePath }] : [];
      });
      const tasks = scoped.flatMap(({ method, path }) =>
        b.uids
          .filter((uid) => uid.includes("/"))
          .flatMap((uid) =>
            ["%2F", "%2f"].map((slash) => async () => {
              const { verb, path: url, body } = restRequestOf(method, create(method.input, withPath(path, uid) as never));
              const plain = uid.split("/").map(encodeURIComponent).join("/");
              if (!url.includes(plain)) return; // the scope is not in the path (a body field)
              const res = await fetch(server.baseUrl + url.replace(plain, uid.replaceAll("/", slash)), {
                method: verb,
                headers: { ...a.auth("owner"), ...(body !== undefined ? { "content-type": "application/json" } : {}) },
                ...(body !== undefined ? { body } : {}),
              });
              const text = await res.text();
              const what = `${verb} ${url} with ${slash}: HTTP ${res.status} ${text.slice(0, 200)}`;
              if (![400, 403, 404].includes(res.status)) findings.add(what);
              if (text.includes(MARK)) findings.add(`leak: ${what}`);
            }),
          ),
      );
      await pool(6, tasks);
      findings.check();
    }, LONG);
  }

  // ---- 2. lists filtered at B, and B's page tokens --------------------------------------------------------

  it("every List filtered at B (every uidp form, every string filter) returns nothing of B", async () => {
    const findings = new Findings();
    const lists = implementedMethods().filter((m) => m.name.startsWith("List") && rowsField(m.output));
    expect(lists.length).toBeGreaterThan(4);
    const random = generator(SEED + 1);
    const tasks = lists.flatMap((method) => {
      const filters: Array<{ how: string; request: Record<string, unknown> }> = [];
      const uidp = method.input.fields.find((f) => f.name === "uidp");
      if (uidp) {
        for (const uid of b.uids) {
          filters.push({ how: "uidp.descendants_of", request: { uidp: { descendantsOf: uid } } });
          filters.push({ how: "uidp.children_of", request: { uidp: { childrenOf: uid } } });
          filters.push({ how: "uidp.ancestors_of", request: { uidp: { ancestorsOf: uid } } });
        }
        for (const t of sample(b.uids.flatMap((uid) => tricks(uid).slice(1)), SAMPLES, random)) {
          filters.push({ how: `uidp.descendants_of=${t.how}`, request: { uidp: { descendantsOf: t.value } } });
          filters.push({ how: `uidp.children_of=${t.how}`, request: { uidp: { childrenOf: t.value } } });
        }
        filters.push({ how: "uidp.ids", request: { uidp: { ids: b.uids } } });
        filters.push({ how: "uidp.in_root", request: { uidp: { inRoot: true } } });
      }
      // A scoped List's scope field (TermsService, the access requests) is aimed at B's uids here; an error
      // quoting a name the caller sent there echoes the caller's own input, and part 1 covers the scope field.
      const rule = ruleOf(method);
      const scopeField = rule.kind === "scoped" && rule.scopePath.length === 1 ? rule.scopePath[0] : undefined;
      for (const f of method.input.fields) {
        if (f.fieldKind !== "scalar" || f.scalar !== ScalarType.STRING || f.name === "page_token" || f.name === "order_by") continue;
        for (const uid of b.uids) filters.push({ how: `${f.name}=uid`, request: { [f.localName]: uid } });
        if (f !== scopeField) filters.push({ how: `${f.name}=B's name`, request: { [f.localName]: `repo${MARK}` } });
      }
      return (["owner", "viewer"] as const).flatMap((caller) =>
        filters.map(({ how, request }) => async () => {
          const out = await call(protocol, server.baseUrl, method, { ...request, pageSize: 200 } as never, a.auth(caller));
          const what = `${nameOf(method)} ${how} as ${caller}`;
          checkListAnswer(method, out, what, findings);
        }),
      );
    });
    await pool(6, tasks);
    findings.check();
  }, LONG);

  it("every List given a page token B's owner received answers nothing of B", async () => {
    const findings = new Findings();
    const lists = implementedMethods().filter((m) => m.name.startsWith("List") && rowsField(m.output));
    let scopedTokens = 0;
    for (const method of lists) {
      // A scoped List names its group: B's owner lists at B; the attackers present B's token at B and at A.
      const rule = ruleOf(method);
      const at = (org: Org) => (rule.kind === "scoped" ? withPath(rule.scopePath, org.org) : {});
      for (const request of [at(b), { uidp: { descendantsOf: b.org } }]) {
        if (!method.input.fields.some((f) => f.name === "uidp") && "uidp" in request) continue;
        const first = await call(protocol, server.baseUrl, method, { ...request, pageSize: 1 } as never, b.auth("owner"));
        expect(first.error?.message).toBeUndefined();
        const token = (first.message as unknown as { nextPageToken: string }).nextPageToken;
        if (!token) continue;
        if (rule.kind === "scoped") scopedTokens++;
        for (const caller of attackers) {
          for (const aimed of rule.kind === "scoped" ? [request, at(a)] : [request]) {
            const out = await call(protocol, server.baseUrl, method, { ...aimed, pageSize: 1, pageToken: token } as never, a.auth(caller));
            checkListAnswer(method, out, `${nameOf(method)} ${JSON.stringify(aimed)} with B's page token as ${caller}`, findings);
          }
        }
      }
    }
    expect(scopedTokens, "scoped Lists (terms acceptances, access requests) paged").toBeGreaterThan(0);
    findings.check();
  }, LONG);
});

/** A List answer to a caller of A: an error other than INTERNAL, or rows none of which is B's. */
function checkListAnswer(method: DescMethodUnary, out: Outcome<DescMessage>, what: string, findings: Findings): void {
  const text = textOf(method, out);
  if (text.includes(MARK)) findings.add(`leak: ${what}: ${text.slice(0, 300)}`);
  if (out.error) {
    if (![Code.InvalidArgument, Code.PermissionDenied, Code.NotFound].includes(out.error.code)) findings.add(`${what}: ${Code[out.error.code]} ${out.error.message}`);
    return;
  }
  const rows = (out.message as unknown as Record<string, Array<{ uid: string }>>)[rowsField(method.output)!.localName]!;
  for (const row of rows) if (isWithin(row.uid, b.org)) findings.add(`${what}: returned ${row.uid}`);
}

// ---- 3. a list never returns what a get by the same caller would refuse ------------------------------------

/** The Get of a List's resource, in the same service: ListRoleBindings -> GetRoleBinding, ListIdentities -> GetIdentity. */
function getOf(list: DescMethodUnary): DescMethodUnary | undefined {
  const plural = list.name.slice("List".length);
  const singular = plural.endsWith("ies") ? `${plural.slice(0, -3)}y` : plural.replace(/s$/, "");
  const get = list.parent.methods.find((m) => m.name === `Get${singular}`);
  return get && isUnary(get) ? get : undefined;
}

const everyCaller: readonly Caller[] = ["owner", "editor", "viewer", "teamViewer", "otherViewer", "confined", "confinedOther", "stranger"];

describe.each(["grpc", "rest"] as const satisfies readonly Protocol[])("a list never returns what a get would refuse [%s]", (protocol) => {
  it("for every List with a Get, every caller, every row of every page: the Get of its uid succeeds", async () => {
    const findings = new Findings();
    const pairs = implementedMethods().flatMap((m) => {
      const get = m.name.startsWith("List") && rowsField(m.output) ? getOf(m) : undefined;
      return get ? [{ list: m, get }] : [];
    });
    expect(pairs.map((p) => nameOf(p.list)).sort()).toEqual(expect.arrayContaining(["GroupsService.ListGroups", "RoleBindingsService.ListRoleBindings"]));
    let rowsSeen = 0;
    for (const { list, get } of pairs) {
      for (const org of [a]) {
        for (const caller of everyCaller) {
          let pageToken = "";
          do {
            const page = await call(protocol, server.baseUrl, list, { pageSize: 50, pageToken } as never, org.auth(caller));
            if (page.error) {
              findings.add(`${nameOf(list)} as ${caller}: ${Code[page.error.code]} ${page.error.message}`);
              break;
            }
            const rows = (page.message as unknown as Record<string, Array<{ uid: string }>>)[rowsField(list.output)!.localName]!;
            const results = await pool(
              6,
              rows.map((row) => async () => ({ row, out: await call(protocol, server.baseUrl, get, { uid: row.uid } as never, org.auth(caller)) })),
            );
            for (const { row, out } of results) {
              rowsSeen++;
              if (out.error) findings.add(`${nameOf(list)} gave ${row.uid} to ${caller}, ${nameOf(get)} answers ${Code[out.error.code]}`);
              if (org === a && isWithin(row.uid, b.org)) findings.add(`${nameOf(list)} gave B's ${row.uid} to ${caller} of A`);
            }
            pageToken = (page.message as unknown as { nextPageToken: string }).nextPageToken;
          } while (pageToken);
        }
      }
    }
    expect(rowsSeen).toBeGreaterThan(50);
    findings.check();
  }, LONG);
});

// ---- 4. lower roles never escalate ---------------------------------------------------------------------------

/** The managed role each caller holds on A's org (none: bound lower, or confined below it). */
const roleOnOrg: Partial<Record<Caller, string>> = { editor: "editor", viewer: "viewer" };
const lowerCallers: readonly Caller[] = ["editor", "viewer", "teamViewer", "otherViewer", "confined", "confinedOther", "stranger"];

describe.each(["grpc", "rest"] as const satisfies readonly Protocol[])("lower roles never escalate [%s]", (protocol) => {
  it("no caller binds itself, changes its own binding, or defines a role, with capabilities it lacks on A's org", async () => {
    const findings = new Findings();
    const { db } = server.database;
    const subjects = await Promise.all(
      lowerCallers.map(async (caller) => {
        const self = a.identity[caller];
        const [own] = await db.select({ uid: roleBindings.uid }).from(roleBindings).where(eq(roleBindings.identityUid, self));
        return { caller: caller as string, self, own, auth: a.auth(caller), held: new Set<number>(roleOnOrg[caller] ? managedRole(roleOnOrg[caller]).capabilities : []) };
      }),
    );
    subjects.push({ caller: "binder", self: binder.identity, own: { uid: binder.binding }, auth: binder.auth, held: new Set<number>(BINDER_CAPABILITIES) });
    for (const { caller, self, own, auth, held } of subjects) {
      for (const role of managedRoles) {
        const lacks = role.capabilities.filter((c) => !held.has(c));
        if (lacks.length === 0) continue;
        const attempts: Array<[string, DescMethodUnary, object]> = [
          ["bind itself", RoleBindingsService.method.createRoleBinding, { parent: a.org, roleBinding: { identityUid: self, roleUid: role.uid } }],
          [
            "bind itself in a batch",
            RoleBindingsService.method.batchCreateRoleBindings,
            { parent: a.org, roleUid: role.uid, requests: [{ roleBinding: { identityUid: self } }] },
          ],
          ["define the role", RolesService.method.createRole, { parent: a.org, role: { name: `copy-${role.name.replace(/\W/g, "-")}`, capabilities: role.capabilities } }],
        ];
        if (own) {
          attempts.push(["change its own binding", RoleBindingsService.method.updateRoleBinding, { roleBinding: { uid: own.uid, roleUid: role.uid }, updateMask: { paths: ["role_uid"] } }]);
        }
        for (const [what, method, request] of attempts) {
          const out = await call(protocol, server.baseUrl, method, request as never, auth);
          const got = codeOf(out);
          // NOT_FOUND: the caller may not even see its own binding (no CAP_IAM_ROLE_BINDINGS_LIST there).
          if (got !== Code.PermissionDenied && !(got === Code.NotFound && what === "change its own binding")) {
            findings.add(`${caller} could ${what} to ${role.name}: ${show(got)} ${out.error?.message ?? ""}`);
          }
        }
      }
    }
    findings.check();
  }, LONG);
});

// ---- 5. a uid of B in a body field ---------------------------------------------------------------------------

describe.each(["grpc", "rest"] as const satisfies readonly Protocol[])("a uid of B in a body field [%s]", (protocol) => {
  it("A's owner cannot bind B's identities or roles into A, nor change a binding of A to them", async () => {
    const findings = new Findings();
    const identitiesOfB = [b.member, b.identity.confined, b.identity.confinedOther];
    const rolesOfB = [b.role];
    const viewer = managedRole("viewer").uid;
    const attempts: Array<[string, DescMethodUnary, object]> = [
      ...identitiesOfB.map((id): [string, DescMethodUnary, object] => [`bind B's identity ${id}`, RoleBindingsService.method.createRoleBinding, { parent: a.team, roleBinding: { identityUid: id, roleUid: viewer } }]),
      ...rolesOfB.map((r): [string, DescMethodUnary, object] => [`bind to B's role ${r}`, RoleBindingsService.method.createRoleBinding, { parent: a.team, roleBinding: { identityUid: a.member, roleUid: r } }]),
      ...identitiesOfB.map((id): [string, DescMethodUnary, object] => [
        `batch-bind B's identity ${id}`,
        RoleBindingsService.method.batchCreateRoleBindings,
        { parent: a.team, roleUid: viewer, requests: [{ roleBinding: { identityUid: id } }] },
      ]),
      ...identitiesOfB.map((id): [string, DescMethodUnary, object] => [
        `move A's binding to B's identity ${id}`,
        RoleBindingsService.method.updateRoleBinding,
        { roleBinding: { uid: a.binding, identityUid: id }, updateMask: { paths: ["identity_uid"] } },
      ]),
      ...rolesOfB.map((r): [string, DescMethodUnary, object] => [
        `move A's binding to B's role ${r}`,
        RoleBindingsService.method.updateRoleBinding,
        { roleBinding: { uid: a.binding, roleUid: r }, updateMask: { paths: ["role_uid"] } },
      ]),
      ...rolesOfB.map((r): [string, DescMethodUnary, object] => [
        `map a group of A's identity provider to B's role ${r}`,
        ExternalGroupRoleMappingsService.method.createExternalGroupRoleMapping,
        { parent: a.identityProvider, externalGroupRoleMapping: { externalGroupId: "x", roleUid: r } },
      ]),
      [
        "map a group of A's identity provider onto B's organization",
        ExternalGroupRoleMappingsService.method.createExternalGroupRoleMapping,
        { parent: a.identityProvider, externalGroupRoleMapping: { externalGroupId: "x", roleUid: viewer, scope: b.org } },
      ],
      [
        "batch-delete B's mapping under A's identity provider",
        ExternalGroupRoleMappingsService.method.batchDeleteExternalGroupRoleMappings,
        { parent: a.identityProvider, names: [b.mapping] },
      ],
    ];
    for (const [what, method, request] of attempts) {
      const out = await call(protocol, server.baseUrl, method, request as never, a.auth("owner"));
      const got = codeOf(out);
      if (![Code.InvalidArgument, Code.NotFound, Code.PermissionDenied].includes(got as Code)) findings.add(`${what}: ${show(got)}`);
      if (textOf(method, out).includes(MARK)) findings.add(`leak: ${what}: ${textOf(method, out)}`);
    }
    findings.check();
    const [mapping] = await server.database.db.select().from(externalGroupRoleMappings).where(eq(externalGroupRoleMappings.uid, b.mapping));
    expect(mapping, "B's mapping is still there").toBeDefined();
  });
});
