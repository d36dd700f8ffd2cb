// The outbox event a method's call records (kernel/outbox.ts): subject, group, body, and the redaction of
// fields marked debug_redact (an identity provider's client secret, an invite's code), at any depth.
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { GroupInvitesService, GroupInviteSchema } from "../../gen/chainguard/platform/iam/v2/group_invites_pb.js";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { IdentityProviderSchema } from "../../gen/chainguard/platform/iam/v2/identity_providers_pb.js";
import { TagsService } from "../../gen/chainguard/platform/registry/v2/tags_pb.js";
import { registry } from "../../src/kernel/descriptors.js";
import { eventPlanOf, groupOfSubject, outboxEventOf, redacted } from "../../src/kernel/outbox.js";

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
  it("a create: the response's uid, the group above it, the response as the body", () => {
    const plan = eventPlanOf(TagsService.method.createTag)!;
    const tag = `${team}/bbbbbbbbbbbbbbbb/cccccccccccccccc`;
    const response = create(TagsService.method.createTag.output, { uid: tag, name: "latest" });
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
    });
  });

  it("a delete: the request's uid as the subject, the request as the body", () => {
    const plan = eventPlanOf(GroupsService.method.deleteGroup)!;
    const request = create(GroupsService.method.deleteGroup.input, { uid: team });
    const event = outboxEventOf(plan, { request, response: create(GroupsService.method.deleteGroup.output), actor: "me" }, registry);
    expect(event).toMatchObject({ subject: team, groupUid: team, body: { uid: team } });
  });

  it("a method without an event has no plan", () => {
    expect(eventPlanOf(GroupsService.method.getGroup)).toBeUndefined();
  });
});

describe("redaction of debug_redact fields", () => {
  it("clears an identity provider's client secret, inside its oidc config, and keeps the rest", () => {
    const provider = create(IdentityProviderSchema, {
      uid: `${team}/bbbbbbbbbbbbbbbb`,
      name: "okta",
      configuration: { case: "oidc", value: { issuer: "https://idp.example.com", clientId: "id", clientSecret: "s3cret" } },
    });
    const out = redacted(IdentityProviderSchema, provider);
    expect(out.configuration.case === "oidc" && out.configuration.value.clientSecret).toBe("");
    expect(out.configuration.case === "oidc" && out.configuration.value.clientId).toBe("id");
    // The message itself is left as it was (the response still carries what it carries).
    expect(provider.configuration.case === "oidc" && provider.configuration.value.clientSecret).toBe("s3cret");
  });

  it("clears an invite's code in an event body", () => {
    const plan = eventPlanOf(GroupInvitesService.method.createGroupInvite)!;
    const response = create(GroupInviteSchema, { uid: `${team}/bbbbbbbbbbbbbbbb`, code: "join-me" });
    const request = create(GroupInvitesService.method.createGroupInvite.input, { parent: team });
    const event = outboxEventOf(plan, { request, response, actor: "me" }, registry);
    expect(JSON.stringify(event.body)).not.toContain("join-me");
    expect(event.body).toMatchObject({ uid: `${team}/bbbbbbbbbbbbbbbb` });
  });

  it("does not copy a message that holds nothing to redact", () => {
    const request = create(GroupsService.method.deleteGroup.input, { uid: team });
    expect(redacted(GroupsService.method.deleteGroup.input, request)).toBe(request);
  });
});
