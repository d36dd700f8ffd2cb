// The pure parts of event delivery: the retry schedule, and a delivery as an HTTP request (CloudEvent
// headers, the body, its digest in a token the server's keys verify).
import { createHash } from "node:crypto";
import { generateKeyPair, jwtVerify } from "jose";
import { describe, expect, it } from "vitest";
import { deliveryRequest, WEBHOOK_AUDIENCE } from "../../src/events/delivery/cloudevent.js";
import type { ClaimedDelivery } from "../../src/events/delivery/queue.js";
import { retryDelayMs } from "../../src/events/delivery/worker.js";
import type { KeyStore } from "../../src/kernel/auth/index.js";

describe("retryDelayMs", () => {
  const opts = { retryBaseMs: 1_000, retryMaxMs: 3_600_000 };
  it("doubles from the base, drawn from the upper half of each step", () => {
    expect(retryDelayMs(1, opts, () => 0)).toBe(500);
    expect(retryDelayMs(1, opts, () => 1)).toBe(1_000);
    expect(retryDelayMs(2, opts, () => 1)).toBe(2_000);
    expect(retryDelayMs(5, opts, () => 0.5)).toBe(12_000);
  });
  it("is capped, also for attempt counts far beyond the cap", () => {
    for (const attempt of [13, 30, 100, 10_000]) {
      expect(retryDelayMs(attempt, opts, () => 1)).toBe(3_600_000);
      expect(retryDelayMs(attempt, opts, () => 0)).toBe(1_800_000);
    }
  });
  it("keeps retrying for a day in about three dozen attempts", () => {
    let elapsed = 0;
    let attempts = 0;
    while (elapsed < 24 * 3_600_000) elapsed += retryDelayMs(++attempts, opts);
    expect(attempts).toBeGreaterThan(20);
    expect(attempts).toBeLessThan(60);
  });
});

describe("deliveryRequest", () => {
  it("is a binary-mode CloudEvent whose token binds its body", async () => {
    const { privateKey, publicKey } = await generateKeyPair("ES256");
    const keys = { signingKey: async () => ({ kid: "k1", alg: "ES256", key: privateKey }) } as unknown as KeyStore;
    const d: ClaimedDelivery = {
      eventId: "0b3d2c4e-1111-4222-8333-944455556666",
      subscriptionUid: "org/sub",
      attempt: 2,
      createTime: new Date(),
      sink: "https://hooks.example.com/x",
      subscriptionGroup: "org",
      type: "dev.chainguard.api.platform.registry.repo.created.v1",
      subject: "org/team/repo",
      eventGroup: "org/team",
      method: "/chainguard.platform.registry.v2.ReposService/CreateRepo",
      actor: "org/person",
      body: '{"uid": "org/team/repo", "name": "n\\u00e9"}',
      bodyType: "chainguard.platform.registry.v2.Repo",
      extensions: { group: "org/team" },
      eventTime: new Date("2026-01-02T03:04:05.678Z"),
    };
    const req = await deliveryRequest(d, { issuer: "https://api.example.com", keys });
    expect(req.headers).toMatchObject({
      "ce-specversion": "1.0",
      "ce-id": d.eventId,
      "ce-type": d.type,
      "ce-source": "https://api.example.com/chainguard.platform.registry.v2.ReposService/CreateRepo",
      "ce-subject": "org/team/repo",
      "ce-time": "2026-01-02T03:04:05.678Z",
      "ce-group": "org/team",
      "ce-bodytype": "chainguard.platform.registry.v2.Repo",
      "content-type": "application/json",
      "content-length": String(req.body.length),
    });
    expect(JSON.parse(req.body.toString())).toEqual({ actor: { subject: "org/person" }, body: { uid: "org/team/repo", name: "né" } });
    const token = req.headers.authorization!.replace(/^Bearer /, "");
    const { payload, protectedHeader } = await jwtVerify(token, publicKey, { issuer: "https://api.example.com", audience: WEBHOOK_AUDIENCE });
    expect(protectedHeader.kid).toBe("k1");
    expect(payload.sub).toBe("webhook:org");
    expect(payload.webhook).toEqual({ digest: `sha256:${createHash("sha256").update(req.body).digest("hex")}` });
    expect(payload.exp! - payload.iat!).toBe(300);
  });

  describe("extensions and body", () => {
    const keys = { signingKey: async () => ({ kid: "k1", alg: "ES256", key: (await generateKeyPair("ES256")).privateKey }) } as unknown as KeyStore;
    const base: ClaimedDelivery = {
      eventId: "0b3d2c4e-1111-4222-8333-944455556666",
      subscriptionUid: "org/sub",
      attempt: 1,
      createTime: new Date(),
      sink: "https://hooks.example.com/x",
      subscriptionGroup: "org",
      type: "dev.chainguard.api.iam.external_group_role_mappings.deleted.v1",
      subject: "org/team/idp/map",
      eventGroup: "org/team",
      method: "/chainguard.platform.iam.v2.ExternalGroupRoleMappingsService/DeleteExternalGroupRoleMapping",
      actor: "org/person",
      body: '{"uid":"org/team/idp/map"}',
      bodyType: "chainguard.platform.iam.v2.DeleteExternalGroupRoleMappingRequest",
      extensions: { group: "org", identityprovider: "org/team/idp" },
      eventTime: new Date(),
    };
    const ceHeaders = (h: Record<string, string>) => Object.fromEntries(Object.entries(h).filter(([k]) => k.startsWith("ce-") && !["ce-id", "ce-time", "ce-specversion"].includes(k)));

    it("sends each stored extension as its ce- header, ce-group as stored (not the event's group), and ce-bodytype", async () => {
      const req = await deliveryRequest(base, { issuer: "https://api.example.com", keys });
      expect(ceHeaders(req.headers)).toEqual({
        "ce-type": base.type,
        "ce-source": `https://api.example.com${base.method}`,
        "ce-subject": "org/team/idp/map",
        "ce-group": "org",
        "ce-identityprovider": "org/team/idp",
        "ce-bodytype": "chainguard.platform.iam.v2.DeleteExternalGroupRoleMappingRequest",
      });
    });

    it("an event without a body is the actor alone", async () => {
      const req = await deliveryRequest({ ...base, body: null }, { issuer: "https://api.example.com", keys });
      expect(JSON.parse(req.body.toString())).toEqual({ actor: { subject: "org/person" } });
    });

    it("an event recorded before extensions were kept gets ce-group from its group, and no ce-bodytype", async () => {
      const req = await deliveryRequest({ ...base, extensions: {}, bodyType: "" }, { issuer: "https://api.example.com", keys });
      expect(req.headers["ce-group"]).toBe("org/team");
      expect(req.headers).not.toHaveProperty("ce-bodytype");
      expect(req.headers).not.toHaveProperty("ce-identityprovider");
    });

    it("sends no header for a stored name that is not a CloudEvents extension name", async () => {
      const req = await deliveryRequest({ ...base, extensions: { group: "org", "Bad-Name": "x", "": "y" } }, { issuer: "https://api.example.com", keys });
      expect(Object.keys(req.headers).filter((k) => k.startsWith("ce-bad") || k === "ce-")).toEqual([]);
    });
  });
});
