// The outbox event a method's call records (kernel/outbox.ts): subject, group, extensions, body type, and the
// body as events carry it: the fields a message's event_body option keeps, or none, and at any depth without
// fields marked debug_redact (an identity provider's client secret, an invite's code) or server_added.
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { GroupInvitesService, GroupInviteSchema } from "../../gen/chainguard/platform/iam/v2/group_invites_pb.js";
import { AccountAssociationsService } from "../../gen/chainguard/platform/iam/v2/account_associations_pb.js";
import { ExternalGroupRoleMappingsService } from "../../gen/chainguard/platform/iam/v2/external_group_role_mappings_pb.js";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { IdentityProviderSchema } from "../../gen/chainguard/platform/iam/v2/identity_providers_pb.js";
import { RoleBindingsService } from "../../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import { TagsService } from "../../gen/chainguard/platform/registry/v2/tags_pb.js";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { eventRuleOf, registry, servedMethods } from "../../src/kernel/descriptors.js";
import { eventBody, eventPlanOf, groupOfSubject, outboxEventOf } from "../../src/kernel/outbox.js";

const org = "0123456789abcdef0123456789abcdef01234567";
const team = `${org}/aaaaaaaaaaaaaaaa`;

describe("groupOfSubject", () => {
  it.each([
    [team, 0, team],
    [`${team}/bbbbbbbbbbbbbbbb`, 1, team],
    [`${team}/bbbbbbbbbbbbbbbb/cccccccccccccccc`, 2, team],
    [org, 1, ""],
    [org, 0, org],
  ])("%s, %i segments below its group: %s", (uid, depth, group) => {
    expect(groupOfSubject(uid, depth)).toBe(group);
  });
});

describe("outboxEventOf", () => {
  it("a create: the response's uid, the group above it, the response as the body (without fields the server adds)", () => {
    const plan = eventPlanOf(TagsService.method.createTag)!;
    const tag = `${team}/bbbbbbbbbbbbbbbb/cccccccccccccccc`;
    const response = create(TagsService.method.createTag.output, { uid: tag, name: "latest", createTime: timestampFromDate(new Date()) });
    const request = create(TagsService.method.createTag.input, { parent: `${team}/bbbbbbbbbbbbbbbb` });
    const event = outboxEventOf(plan, { request, response, actor: "me" }, registry);
    expect(event).toEqual({
      type: "dev.chainguard.api.platform.registry.tag.created.v1",
      subject: tag,
      groupUid: team,
      audience: plan.audience,
      method: "/chainguard.platform.registry.v2.TagsService/CreateTag",
      actor: "me",
      body: { uid: tag, name: "latest" },
      bodyType: "chainguard.platform.registry.v2.Tag",
      // A tag's group extension is its organization; subscriptions are matched on the team it happened in.
      extensions: { group: org },
    });
  });

  it("a delete: the request's uid as the subject, the request as the body", () => {
    const plan = eventPlanOf(GroupsService.method.deleteGroup)!;
    const request = create(GroupsService.method.deleteGroup.input, { uid: team });
    const event = outboxEventOf(plan, { request, response: create(GroupsService.method.deleteGroup.output), actor: "me" }, registry);
    // The deleted group's subscribers and its ancestors' hear it; its group extension is its parent.
    expect(event).toMatchObject({ subject: team, groupUid: team, body: { uid: team }, bodyType: "chainguard.platform.iam.v2.DeleteGroupRequest", extensions: { group: org } });
  });

  it("a deleted organization has no group extension (it has no parent)", () => {
    const plan = eventPlanOf(GroupsService.method.deleteGroup)!;
    const request = create(GroupsService.method.deleteGroup.input, { uid: org });
    expect(outboxEventOf(plan, { request, response: create(GroupsService.method.deleteGroup.output), actor: "me" }, registry).extensions).toEqual({});
  });

  it("a mapping's events name its organization and its identity provider", () => {
    const idp = `${team}/bbbbbbbbbbbbbbbb`;
    const mapping = `${idp}/cccccccccccccccc`;
    const del = ExternalGroupRoleMappingsService.method.deleteExternalGroupRoleMapping;
    const one = outboxEventOf(eventPlanOf(del)!, { request: create(del.input, { uid: mapping }), response: create(del.output), actor: "me" }, registry);
    expect(one).toMatchObject({ subject: mapping, groupUid: team, extensions: { group: org, identityprovider: idp } });
    const batch = ExternalGroupRoleMappingsService.method.batchDeleteExternalGroupRoleMappings;
    const many = outboxEventOf(eventPlanOf(batch)!, { request: create(batch.input, { parent: idp }), response: create(batch.output, { parent: idp }), actor: "me" }, registry);
    expect(many).toMatchObject({ subject: idp, groupUid: team, extensions: { group: org, identityprovider: idp } });
  });

  it("a deleted account association's event has no body", () => {
    const del = AccountAssociationsService.method.deleteAccountAssociation;
    const event = outboxEventOf(eventPlanOf(del)!, { request: create(del.input, { uid: team }), response: create(del.output), actor: "me" }, registry);
    expect(event).toMatchObject({ subject: team, body: null, bodyType: "chainguard.platform.iam.v2.DeleteAccountAssociationRequest", extensions: { group: team } });
  });

  it("every served method that declares an event has a plan: its extensions, subject field and event_body are ones the outbox can follow", () => {
    const evented = servedMethods.filter((m) => eventRuleOf(m));
    expect(evented.length).toBeGreaterThan(30);
    for (const m of evented) expect(() => eventPlanOf(m), `${m.parent.name}.${m.name}`).not.toThrow();
  });

  it("a method without an event has no plan", () => {
    expect(eventPlanOf(GroupsService.method.getGroup)).toBeUndefined();
  });
});

describe("event bodies", () => {
  it("clears an identity provider's client secret, inside its oidc config, and keeps the rest", () => {
    const provider = create(IdentityProviderSchema, {
      uid: `${team}/bbbbbbbbbbbbbbbb`,
      name: "okta",
      configuration: { case: "oidc", value: { issuer: "https://idp.example.com", clientId: "id", clientSecret: "s3cret" } },
    });
    const out = eventBody(IdentityProviderSchema, provider)!;
    expect(out.configuration.case === "oidc" && out.configuration.value.clientSecret).toBe("");
    expect(out.configuration.case === "oidc" && out.configuration.value.clientId).toBe("id");
    // The message itself is left as it was (the response still carries what it carries).
    expect(provider.configuration.case === "oidc" && provider.configuration.value.clientSecret).toBe("s3cret");
  });

  it("keeps only what a message's event_body option keeps: an identity provider's times go", () => {
    const provider = create(IdentityProviderSchema, { uid: `${team}/bbbbbbbbbbbbbbbb`, name: "okta", createTime: timestampFromDate(new Date()), scim: { enabled: true } });
    const out = eventBody(IdentityProviderSchema, provider)!;
    expect(out.createTime).toBeUndefined();
    expect(out).toMatchObject({ name: "okta", scim: { enabled: true } });
  });

  it("clears fields the server adds at any depth: a batch's bindings carry no update time", () => {
    const desc = RoleBindingsService.method.batchCreateRoleBindings.output;
    const response = create(desc, { roleBindings: [{ uid: `${team}/bbbbbbbbbbbbbbbb`, updateTime: timestampFromDate(new Date()), createTime: timestampFromDate(new Date(0)) }] });
    const out = eventBody(desc, response)!;
    expect(out.roleBindings[0]!.updateTime).toBeUndefined();
    expect(out.roleBindings[0]!.createTime).toBeDefined();
    expect(response.roleBindings[0]!.updateTime).toBeDefined();
  });

  it("an invite's event keeps its uid and expiration time only (not its code, email, role or key id)", () => {
    const plan = eventPlanOf(GroupInvitesService.method.createGroupInvite)!;
    const expirationTime = timestampFromDate(new Date("2026-01-02T03:04:05Z"));
    const response = create(GroupInviteSchema, { uid: `${team}/bbbbbbbbbbbbbbbb`, code: "join-me", email: "a@example.com", roleUid: "viewer", keyId: "k", expirationTime });
    const request = create(GroupInvitesService.method.createGroupInvite.input, { parent: team });
    const event = outboxEventOf(plan, { request, response, actor: "me" }, registry);
    expect(event.body).toEqual({ uid: `${team}/bbbbbbbbbbbbbbbb`, expirationTime: "2026-01-02T03:04:05Z" });
  });

  it("does not copy a message that holds nothing to redact", () => {
    const request = create(GroupsService.method.deleteGroup.input, { uid: team });
    expect(eventBody(GroupsService.method.deleteGroup.input, request)).toBe(request);
  });
});
