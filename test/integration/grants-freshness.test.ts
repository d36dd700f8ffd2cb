// A change to what a caller is granted, made through this server, holds for the caller's next call at once,
// on every protocol, without waiting for the database's notification. Notifications are handed to the server
// three seconds late here (as one can arrive late on a loaded machine), so only what the server clears for
// itself before answering (iam/index.ts, grantServiceNames) keeps its remembered grants fresh; the grants
// cache would otherwise keep the old ones for up to 10 s.
import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { RoleBindingsService } from "../../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import { managedRole } from "../../src/iam/managed-roles.js";
import { call, protocols, type Protocol } from "../contract/harness.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { insertPerson, seedWorld, type World } from "../support/world.js";

let server: TestServer;
let world: World;

beforeAll(async () => {
  server = await startTestServer({ notificationDelayMs: 3_000 });
  world = await seedWorld(server);
});
afterAll(async () => {
  await server?.close();
});

describe.each(protocols)("grants changed through this server hold at once [%s]", (protocol: Protocol) => {
  const getGroup = async (uid: string, auth: Record<string, string>) =>
    (await call(protocol, server.baseUrl, GroupsService.method.getGroup, { uid }, auth)).error?.code ?? "ok";

  // REST's CreateGroup path names a parent: an organization is created over the RPC protocols only.
  it.skipIf(protocol === "rest")("the founder of a new organization reads it in the next call", async () => {
    const founder = await insertPerson(server, "founder");
    // Remembered now: the founder holds no binding.
    const eligible = await call(protocol, server.baseUrl, GroupsService.method.checkEligibility, {}, founder.auth);
    expect(eligible.error, eligible.error?.message).toBeUndefined();
    const created = await call(protocol, server.baseUrl, GroupsService.method.createGroup, { group: { name: `org ${protocol}` } }, founder.auth);
    expect(created.error, created.error?.message).toBeUndefined();
    expect(await getGroup(created.message!.uid, founder.auth)).toBe("ok");
  });

  it("an identity bound by an owner reads the group in its next call, and not after the binding is deleted", async () => {
    const member = await insertPerson(server, "member");
    expect(await getGroup(world.org, member.auth)).toBe(Code.PermissionDenied); // remembered: no binding
    const bound = await call(
      protocol,
      server.baseUrl,
      RoleBindingsService.method.createRoleBinding,
      { parent: world.org, roleBinding: { identityUid: member.uid, roleUid: managedRole("viewer").uid } },
      world.auth("owner"),
    );
    expect(bound.error, bound.error?.message).toBeUndefined();
    expect(await getGroup(world.org, member.auth)).toBe("ok");
    const deleted = await call(protocol, server.baseUrl, RoleBindingsService.method.deleteRoleBinding, { uid: bound.message!.uid }, world.auth("owner"));
    expect(deleted.error, deleted.error?.message).toBeUndefined();
    expect(await getGroup(world.org, member.auth)).toBe(Code.PermissionDenied);
  });
});
