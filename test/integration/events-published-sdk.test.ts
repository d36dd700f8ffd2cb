// Deliveries as a receiver built on the published Go SDK (chainguard-dev/sdk) reads them: for every method that
// declares an event (read from the descriptors: a new one without a row below fails the coverage test), one
// real call, and the delivery a sink subscribed to the organization receives, checked against what the SDK
// states about that event type:
//   - ce-type, and the extensions its method annotation lists, with the values its CloudEventsExtension gives
//     (`group`: for most types the resource's parent; the group itself for a group; the deleted group's
//     parent; the organization for tags and identity provider mappings; `identityprovider` for mappings);
//   - ce-subject, as its CloudEventsSubject gives it;
//   - ce-bodytype, the body's full message name: without it the SDK's events.Body and BodyAs refuse the event
//     (ErrNoBodyType);
//   - the body as its redaction (CloudEventsRedact) leaves it, decoded strictly: every JSON key, at every
//     depth, is a field of the published message (the wire contract in test/fixtures), and at the top level
//     one the redaction keeps (an invite only its uid and expiration time; a deleted account association
//     has no body at all); fields this server adds to published messages never appear.
// Events whose audience is internal are not delivered. The facts below are the SDK's, in this project's words.
import { create, fromJson, toJson, type DescMessage, type DescMethod, type DescMethodUnary, type JsonValue } from "@bufbuild/protobuf";
import { protoCamelCase } from "@bufbuild/protobuf/reflect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ReposService } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { subscriptions } from "../../src/db/schema/index.js";
import { eventRuleOf, isServerAdded, registry } from "../../src/kernel/descriptors.js";
import { newChildUid } from "../../src/kernel/uidp.js";
import { call } from "../contract/harness.js";
import { loadContract, type ContractMessage } from "../support/contract-json.js";
import { CLIENT_SECRET, createEventedCalls, eventedKeyOf, eventedMethods } from "../support/evented-calls.js";
import { startSink, type Received, type TestSink } from "../support/sink.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";

// ---------------------------------------------------------------------------------------------------------
// The published SDK's facts, per method.

type Json = Record<string, unknown>;
/** What the SDK derives a value from: the body before its redaction (proto JSON), and the call's request. */
type From = (body: Json, request: Json) => string;

const parent = (uid: string) => uid.split("/").slice(0, -1).join("/");
const root = (uid: string) => uid.split("/")[0]!;
const str = (v: unknown) => (typeof v === "string" ? v : "");
const uidOf: From = (b) => str(b.uid);

interface Fact {
  /** The CloudEvent type its annotation gives. */
  type: string;
  /** Delivered to customers (audience CUSTOMER); internal events stay inside. */
  customer: boolean;
  /** The body's message (the bodytype extension). */
  bodyType: string;
  /**
   * The JSON names the redacted body may carry at its top level (all of the published message's fields when
   * it has no redaction), and below it where the redaction keeps less of a nested message than the published
   * one has (keyed by the nested field's JSON name); null: the event has no body.
   */
  fields: { top: readonly string[]; nested?: Record<string, readonly string[]> } | null;
  subject: From;
  /** Extensions and how their values follow, in the annotation's order. */
  extensions: Record<string, From>;
  /** This server's addition, not an event of the published SDK. */
  addition?: true;
}

const GROUP = ["uid", "name", "description", "resourceLimits", "verified", "createTime", "updateTime", "kind", "status"];
const IDENTITY = ["uid", "name", "description", "email", "emailUnverified", "company", "lastSeenTime", "createTime", "updateTime", "claimMatch", "staticKeys", "awsIdentity", "servicePrincipal"];
const ROLE = ["uid", "name", "description", "capabilities", "createTime", "updateTime"];
// RoleBinding has no update_time in the published message.
const ROLE_BINDING = ["uid", "identity", "group", "role", "createTime", "identityUid", "roleUid"];
const MAPPING = ["uid", "identityProviderUid", "externalGroupId", "roleUid", "scope", "createTime"];
// The provider's redaction keeps its configuration, the OIDC part without the client secret, and not its times.
const PROVIDER = {
  top: ["uid", "name", "description", "defaultRole", "oidc", "scim"],
  nested: { oidc: ["issuer", "clientId", "additionalScopes", "groupsClaim", "pkceEnabled", "correlationRule"] },
};
const ASSOCIATION = ["uid", "name", "description", "amazon", "google", "chainguard", "azure", "createTime", "updateTime", "github"];
// The published Repo's sync config keeps its proto name in JSON.
const REPO = ["uid", "name", "description", "catalogTier", "bundles", "aliases", "activeTags", "sync_config", "customOverlay", "createTime", "updateTime"];
// Tag has no create_time in the published message.
const TAG = ["uid", "name", "digest", "updateTime", "deprecated", "bundles"];
// Subscription has neither time in the published message.
const SUBSCRIPTION = ["uid", "sink"];
const UID = ["uid"];

const iam = (m: string) => `chainguard.platform.iam.v2.${m}`;
const registryMsg = (m: string) => `chainguard.platform.registry.v2.${m}`;
const inParent = { group: ((b) => parent(str(b.uid))) as From };

const facts: Record<string, Fact> = {
  "GroupsService.CreateGroup": { type: "dev.chainguard.api.iam.group.created.v1", customer: true, bodyType: iam("Group"), fields: { top: GROUP }, subject: uidOf, extensions: { group: uidOf } },
  "GroupsService.UpdateGroup": { type: "dev.chainguard.api.iam.group.updated.v1", customer: true, bodyType: iam("Group"), fields: { top: GROUP }, subject: uidOf, extensions: { group: uidOf } },
  "GroupsService.DeleteGroup": { type: "dev.chainguard.api.iam.group.deleted.v1", customer: true, bodyType: iam("DeleteGroupRequest"), fields: { top: UID }, subject: uidOf, extensions: inParent },
  "GroupsService.RequestGroupAccess": {
    type: "dev.chainguard.api.iam.group_access.requested.v1",
    customer: true,
    bodyType: iam("RequestGroupAccessRequest"),
    fields: { top: ["groupUid"] },
    subject: (b) => str(b.groupUid),
    extensions: { group: (b) => str(b.groupUid) },
    addition: true,
  },
  "IdentitiesService.CreateIdentity": { type: "dev.chainguard.api.iam.identity.created.v1", customer: true, bodyType: iam("Identity"), fields: { top: IDENTITY }, subject: uidOf, extensions: inParent },
  "IdentitiesService.UpdateIdentity": { type: "dev.chainguard.api.iam.identity.updated.v1", customer: true, bodyType: iam("Identity"), fields: { top: IDENTITY }, subject: uidOf, extensions: inParent },
  "IdentitiesService.DeleteIdentity": { type: "dev.chainguard.api.iam.identity.deleted.v1", customer: true, bodyType: iam("DeleteIdentityRequest"), fields: { top: UID }, subject: uidOf, extensions: inParent },
  "IdentitiesService.UpdateIdentityMetadata": {
    type: "dev.chainguard.api.iam.identity.metadata.updated.v1",
    customer: false,
    bodyType: iam("IdentityMetadata"),
    fields: null,
    subject: uidOf,
    extensions: {},
  },
  "RolesService.CreateRole": { type: "dev.chainguard.api.iam.roles.created.v1", customer: true, bodyType: iam("Role"), fields: { top: ROLE }, subject: uidOf, extensions: inParent },
  "RolesService.UpdateRole": { type: "dev.chainguard.api.iam.roles.updated.v1", customer: true, bodyType: iam("Role"), fields: { top: ROLE }, subject: uidOf, extensions: inParent },
  "RolesService.DeleteRole": { type: "dev.chainguard.api.iam.roles.deleted.v1", customer: true, bodyType: iam("DeleteRoleRequest"), fields: { top: UID }, subject: uidOf, extensions: inParent },
  "RoleBindingsService.CreateRoleBinding": { type: "dev.chainguard.api.iam.rolebindings.created.v1", customer: true, bodyType: iam("RoleBinding"), fields: { top: ROLE_BINDING }, subject: uidOf, extensions: inParent },
  "RoleBindingsService.UpdateRoleBinding": { type: "dev.chainguard.api.iam.rolebindings.updated.v1", customer: true, bodyType: iam("RoleBinding"), fields: { top: ROLE_BINDING }, subject: uidOf, extensions: inParent },
  "RoleBindingsService.DeleteRoleBinding": { type: "dev.chainguard.api.iam.rolebindings.deleted.v1", customer: true, bodyType: iam("DeleteRoleBindingRequest"), fields: { top: UID }, subject: uidOf, extensions: inParent },
  "RoleBindingsService.BatchCreateRoleBindings": {
    type: "dev.chainguard.api.iam.rolebindings.created.batch.v1",
    customer: true,
    bodyType: iam("BatchCreateRoleBindingsResponse"),
    fields: { top: ["roleBindings"], nested: { roleBindings: ROLE_BINDING } },
    // The group the bindings were made in: the first binding's parent.
    subject: (b) => parent(str((b.roleBindings as Json[])[0]?.uid)),
    extensions: { group: (b) => parent(str((b.roleBindings as Json[])[0]?.uid)) },
  },
  "ExternalGroupRoleMappingsService.CreateExternalGroupRoleMapping": {
    type: "dev.chainguard.api.iam.external_group_role_mappings.created.v1",
    customer: true,
    bodyType: iam("ExternalGroupRoleMapping"),
    fields: { top: MAPPING },
    subject: uidOf,
    extensions: { group: (b) => root(str(b.uid)), identityprovider: (b) => str(b.identityProviderUid) },
  },
  "ExternalGroupRoleMappingsService.DeleteExternalGroupRoleMapping": {
    type: "dev.chainguard.api.iam.external_group_role_mappings.deleted.v1",
    customer: true,
    bodyType: iam("DeleteExternalGroupRoleMappingRequest"),
    fields: { top: UID },
    subject: uidOf,
    extensions: { group: (b) => root(str(b.uid)), identityprovider: (b) => parent(str(b.uid)) },
  },
  "ExternalGroupRoleMappingsService.BatchDeleteExternalGroupRoleMappings": {
    type: "dev.chainguard.api.iam.external_group_role_mappings.deleted.batch.v1",
    customer: true,
    bodyType: iam("BatchDeleteExternalGroupRoleMappingsResponse"),
    fields: { top: ["parent", "externalGroupRoleMappings"], nested: { externalGroupRoleMappings: MAPPING } },
    // The provider the mappings were deleted from.
    subject: (b) => str(b.parent),
    extensions: { group: (b) => root(str(b.parent)), identityprovider: (b) => str(b.parent) },
  },
  "IdentityProvidersService.CreateIdentityProvider": { type: "dev.chainguard.api.iam.identity_providers.created.v1", customer: true, bodyType: iam("IdentityProvider"), fields: PROVIDER, subject: uidOf, extensions: inParent },
  "IdentityProvidersService.UpdateIdentityProvider": { type: "dev.chainguard.api.iam.identity_providers.updated.v1", customer: true, bodyType: iam("IdentityProvider"), fields: PROVIDER, subject: uidOf, extensions: inParent },
  "IdentityProvidersService.DeleteIdentityProvider": { type: "dev.chainguard.api.iam.identity_providers.deleted.v1", customer: true, bodyType: iam("DeleteIdentityProviderRequest"), fields: { top: UID }, subject: uidOf, extensions: inParent },
  // The SCIM lifecycle: about the provider; the plaintext token never in the event.
  "IdentityProvidersService.GenerateScimToken": {
    type: "dev.chainguard.api.iam.identity_providers.scim_token.generated.v1",
    customer: true,
    bodyType: iam("GenerateScimTokenResponse"),
    fields: { top: ["identityProviderUid", "endpointUrl", "expireTime", "etag"] },
    subject: (b) => str(b.identityProviderUid),
    extensions: { group: (b) => parent(str(b.identityProviderUid)) },
  },
  "IdentityProvidersService.RegenerateScimToken": {
    type: "dev.chainguard.api.iam.identity_providers.scim_token.regenerated.v1",
    customer: true,
    bodyType: iam("RegenerateScimTokenResponse"),
    fields: { top: ["identityProviderUid", "endpointUrl", "expireTime", "etag", "previousTokenExpireTime", "requestedOverlap"] },
    subject: (b) => str(b.identityProviderUid),
    extensions: { group: (b) => parent(str(b.identityProviderUid)) },
  },
  "IdentityProvidersService.RevokeScimToken": {
    type: "dev.chainguard.api.iam.identity_providers.scim_token.revoked.v1",
    customer: true,
    bodyType: iam("RevokeScimTokenResponse"),
    fields: { top: ["identityProviderUid", "etag", "enabled", "revokeTime"] },
    subject: (b) => str(b.identityProviderUid),
    extensions: { group: (b) => parent(str(b.identityProviderUid)) },
  },
  "IdentityProvidersService.SetScimEnabled": {
    type: "dev.chainguard.api.iam.identity_providers.scim_enabled.updated.v1",
    customer: true,
    bodyType: iam("SetScimEnabledResponse"),
    fields: { top: ["identityProviderUid", "enabled", "etag"] },
    subject: (b) => str(b.identityProviderUid),
    extensions: { group: (b) => parent(str(b.identityProviderUid)) },
  },
  // An association's uid is its group's.
  "AccountAssociationsService.CreateAccountAssociation": { type: "dev.chainguard.api.iam.account_associations.created.v1", customer: true, bodyType: iam("AccountAssociation"), fields: { top: ASSOCIATION }, subject: uidOf, extensions: { group: uidOf } },
  "AccountAssociationsService.UpdateAccountAssociation": { type: "dev.chainguard.api.iam.account_associations.updated.v1", customer: true, bodyType: iam("AccountAssociation"), fields: { top: ASSOCIATION }, subject: uidOf, extensions: { group: uidOf } },
  "AccountAssociationsService.DeleteAccountAssociation": {
    type: "dev.chainguard.api.iam.account_associations.deleted.v1",
    customer: true,
    bodyType: iam("DeleteAccountAssociationRequest"),
    fields: null,
    subject: (_b, r) => str(r.uid),
    extensions: { group: (_b, r) => str(r.uid) },
  },
  "TermsService.AcceptTerms": {
    type: "dev.chainguard.api.iam.terms.accepted.v1",
    customer: true,
    bodyType: iam("AcceptTermsResponse"),
    fields: { top: ["group", "documentIds"] },
    subject: (b) => str(b.group),
    extensions: { group: (b) => str(b.group) },
  },
  "GroupInvitesService.CreateGroupInvite": {
    type: "dev.chainguard.api.iam.group_invite.created.v1",
    customer: true,
    bodyType: iam("GroupInvite"),
    fields: { top: ["uid", "expirationTime"] },
    subject: uidOf,
    extensions: inParent,
  },
  "GroupInvitesService.DeleteGroupInvite": { type: "dev.chainguard.api.iam.group_invite.deleted.v1", customer: true, bodyType: iam("DeleteGroupInviteRequest"), fields: { top: UID }, subject: uidOf, extensions: inParent },
  "ReposService.CreateRepo": { type: "dev.chainguard.api.platform.registry.repo.created.v1", customer: true, bodyType: registryMsg("Repo"), fields: { top: REPO }, subject: uidOf, extensions: inParent },
  "ReposService.UpdateRepo": { type: "dev.chainguard.api.platform.registry.repo.updated.v1", customer: true, bodyType: registryMsg("Repo"), fields: { top: REPO }, subject: uidOf, extensions: inParent },
  "ReposService.DeleteRepo": { type: "dev.chainguard.api.platform.registry.repo.deleted.v1", customer: true, bodyType: registryMsg("DeleteRepoRequest"), fields: { top: UID }, subject: uidOf, extensions: inParent },
  "ReposService.UpdateRepoReadme": { type: "dev.chainguard.api.platform.registry.repo.updated.v1", customer: true, bodyType: registryMsg("RepoReadme"), fields: { top: ["uid", "content"] }, subject: uidOf, extensions: inParent },
  "TagsService.CreateTag": { type: "dev.chainguard.api.platform.registry.tag.created.v1", customer: true, bodyType: registryMsg("Tag"), fields: { top: TAG }, subject: uidOf, extensions: { group: (b) => root(str(b.uid)) } },
  "TagsService.DeleteTag": { type: "dev.chainguard.api.platform.registry.tag.deleted.v1", customer: true, bodyType: registryMsg("DeleteTagRequest"), fields: { top: UID }, subject: uidOf, extensions: { group: (b) => root(str(b.uid)) } },
  "SubscriptionsService.CreateSubscription": {
    type: "dev.chainguard.api.events.subscription.created.v1",
    customer: true,
    bodyType: "chainguard.platform.events.v2.Subscription",
    fields: { top: SUBSCRIPTION },
    subject: uidOf,
    extensions: inParent,
  },
  "SubscriptionsService.DeleteSubscription": {
    type: "dev.chainguard.api.events.subscription.deleted.v1",
    customer: true,
    bodyType: "chainguard.platform.events.v2.DeleteSubscriptionRequest",
    fields: { top: UID },
    subject: uidOf,
    extensions: inParent,
  },
};

// ---------------------------------------------------------------------------------------------------------
// The published messages' fields (the wire contract), and a strict walk of a JSON body against them.

const published = new Map<string, ContractMessage>();
for (const file of Object.values(loadContract().files)) for (const [name, m] of Object.entries(file.messages ?? {})) published.set(name, m);
const jsonNamesOf = (m: ContractMessage) => m.fields.map((f) => f.jsonName ?? protoCamelCase(f.name));

/**
 * The JSON keys of `json` (a `desc` message's proto JSON, at `path`) that the published message does not define
 * (or the redaction does not keep, where `allowed` says), at any depth.
 */
function unknownKeys(desc: DescMessage, json: Json, path: string, allowed?: readonly string[], nested?: Record<string, readonly string[]>): string[] {
  const contract = published.get(desc.typeName);
  if (!contract) return [`${path || "<body>"}: ${desc.typeName} is not a published message`];
  const names = new Set(allowed ?? jsonNamesOf(contract));
  const found: string[] = [];
  for (const [key, value] of Object.entries(json)) {
    if (!names.has(key)) {
      found.push(`${path}${key}`);
      continue;
    }
    const field = desc.fields.find((f) => f.jsonName === key || f.name === key);
    const inner =
      field?.fieldKind === "message" || (field?.fieldKind === "list" && field.listKind === "message") || (field?.fieldKind === "map" && field.mapKind === "message")
        ? field.message
        : undefined;
    if (!inner || inner.typeName.startsWith("google.protobuf.")) continue;
    const values = (field!.fieldKind === "map" ? Object.values(value as Json) : field!.fieldKind === "list" ? (value as Json[]) : [value]) as Json[];
    for (const v of values) found.push(...unknownKeys(inner, v, `${path}${key}.`, nested?.[key]));
  }
  return found;
}

// ---------------------------------------------------------------------------------------------------------

const FAST = { retryBaseMs: 50, retryMaxMs: 200, pollMs: 50, timeoutMs: 2_000 };
let server: TestServer;
let world: World;
let sink: TestSink;
const { table, prepare } = createEventedCalls();
const evented = eventedMethods();
const CE_STANDARD = new Set(["ce-specversion", "ce-id", "ce-type", "ce-source", "ce-subject", "ce-time"]);

beforeAll(async () => {
  server = await startTestServer({ delivery: FAST });
  world = await seedWorld(server, "sdk-events");
  await prepare(server, world);
  sink = await startSink();
  await server.database.db.insert(subscriptions).values({ uid: newChildUid(world.org), groupUid: world.org, sink: sink.url });
});

afterAll(async () => {
  await sink?.close();
  await server?.close();
});

describe("the facts cover every method that declares an event", () => {
  it("has a row for each, with the type and extensions its descriptor declares", () => {
    expect(Object.keys(facts).sort()).toEqual(evented.map(eventedKeyOf).sort());
    for (const m of evented) {
      const rule = eventRuleOf(m)!;
      const fact = facts[eventedKeyOf(m)]!;
      expect([rule.type, rule.audience === 2, rule.extensions], eventedKeyOf(m)).toEqual([fact.type, fact.customer, Object.keys(fact.extensions)]);
    }
  });

  it("names only published messages, and only their fields", () => {
    for (const [key, fact] of Object.entries(facts)) {
      const message = published.get(fact.bodyType);
      expect(message, `${key}: ${fact.bodyType}`).toBeDefined();
      for (const name of fact.fields?.top ?? []) expect(jsonNamesOf(message!), `${key}: ${name}`).toContain(name);
    }
  });

  it("every field a message of an event body has beyond the published message is marked server_added", () => {
    const seen = new Set<string>();
    const visit = (desc: DescMessage): string[] => {
      if (seen.has(desc.typeName) || desc.typeName.startsWith("google.")) return [];
      seen.add(desc.typeName);
      const contract = published.get(desc.typeName);
      const numbers = new Set(contract?.fields.map((f) => f.number) ?? []);
      return desc.fields.flatMap((f) => {
        const own = numbers.has(f.number) || isServerAdded(f) ? [] : [`${desc.typeName}.${f.name}`];
        const inner = f.fieldKind === "message" || (f.fieldKind === "list" && f.listKind === "message") || (f.fieldKind === "map" && f.mapKind === "message") ? f.message : undefined;
        return [...own, ...(inner ? visit(inner) : [])];
      });
    };
    const unmarked = evented.flatMap((m) => visit(m.output.fields.length === 0 ? m.input : m.output));
    expect(unmarked).toEqual([]);
  });
});

describe.each(evented.map((m) => [eventedKeyOf(m), m] as const))("%s", (key: string, method: DescMethod) => {
  it("is delivered as the published SDK describes it, and its body decodes strictly into the published message", async () => {
    const fact = facts[key]!;
    const c = await table[key]!.ok();
    // A group outside the organization (an access request): its own subscription receives the event.
    if (c.group && c.group !== "<subject>" && c.group !== world.org && !c.group.startsWith(`${world.org}/`)) {
      await server.database.db.insert(subscriptions).values({ uid: newChildUid(c.group), groupUid: c.group, sink: sink.url }).onConflictDoNothing();
    }
    const unary = method as DescMethodUnary;
    const out = await call("connect-json", server.baseUrl, unary, c.request as never, world.auth("owner"));
    expect(out.error?.message).toBeUndefined();
    const bodyIsRequest = method.output.fields.length === 0;
    const request = toJson(method.input, create(method.input, c.request as never), { registry }) as Json;
    // What the SDK derives the subject and extensions from: the whole body, before redaction.
    const whole = bodyIsRequest ? request : (toJson(method.output, out.message!, { registry }) as Json);
    const subject = fact.subject(whole, request);
    const source = `${server.baseUrl}/${method.parent.typeName}/${method.name}`;
    const matches = (r: Received) => r.headers["ce-source"] === source && r.headers["ce-subject"] === subject;
    if (!fact.customer) {
      // Internal events stay inside: give the worker time to (not) deliver it, behind a customer event made after it.
      const marker = await call("connect-json", server.baseUrl, ReposService.method.createRepo, { parent: world.team, repo: { name: `after-${key.length}` } }, world.auth("owner"));
      const markerUid = marker.message?.uid;
      await sink.waitForMatch((r) => r.headers["ce-subject"] === markerUid, "the delivery made after it");
      expect(sink.received.filter((r) => r.headers["ce-type"] === fact.type)).toEqual([]);
      return;
    }
    const d = await sink.waitForMatch(matches, `${fact.type} about ${subject}`);
    const h = d.headers;

    // Type, subject, body type, and the extensions: those the annotation lists, with the SDK's values, no other.
    expect(h["ce-type"]).toBe(fact.type);
    expect(h["ce-bodytype"]).toBe(fact.bodyType);
    const expected = Object.fromEntries(Object.entries(fact.extensions).map(([name, from]) => [`ce-${name}`, from(whole, request)]));
    const extensions = Object.fromEntries(Object.entries(h).filter(([k]) => k.startsWith("ce-") && !CE_STANDARD.has(k) && k !== "ce-bodytype"));
    expect(extensions).toEqual(expected);
    for (const value of Object.values(expected)) expect(value).not.toBe("");

    // The envelope: the actor, and the body unless the redaction leaves none.
    const envelope = JSON.parse(d.body.toString()) as Json;
    expect(envelope.actor).toEqual({ subject: world.identity.owner });
    if (fact.fields === null) {
      expect(Object.keys(envelope)).toEqual(["actor"]);
      return;
    }
    expect(Object.keys(envelope).sort()).toEqual(["actor", "body"]);
    const body = envelope.body as Json;
    const desc = registry.getMessage(fact.bodyType)!;
    expect(unknownKeys(desc, body, "", fact.fields.top, fact.fields.nested)).toEqual([]);
    // Decodes with unknown fields refused (the values have their published types: the wire contract test).
    expect(() => fromJson(desc, body as JsonValue, { registry })).not.toThrow();
    const secrets = [CLIENT_SECRET, (out.message as { token?: string }).token, (out.message as { code?: string }).code].filter((x): x is string => Boolean(x));
    for (const secret of secrets) expect(d.body.toString()).not.toContain(secret);
  });
});
