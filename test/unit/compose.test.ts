// The composition root builds each module and checks it against what the module lists.
import { describe, expect, it } from "vitest";
import { PingService } from "../../gen/chainguard/platform/ping/v2/ping_pb.js";
import { ReposService } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { buildModule } from "../../src/compose.js";
import { bindPartial, type DomainModule } from "../../src/kernel/module.js";
import { pingModule } from "../../src/ping/index.js";

describe("buildModule", () => {
  it("builds a module that binds what it lists", () => {
    expect(buildModule(pingModule, undefined).bindings.map((b) => b.service)).toEqual([PingService]);
  });

  it.each([
    ["binds a service it does not list", [PingService], [PingService, ReposService]],
    ["lists a service it does not bind", [PingService, ReposService], [PingService]],
  ])("refuses a module that %s", (_, listed, bound) => {
    const module: DomainModule<unknown> = { name: "odd", services: listed, create: () => ({ bindings: bound.map((s) => bindPartial(s, {})) }) };
    expect(() => buildModule(module, undefined)).toThrow(/module odd lists the services .* but binds/);
  });
});
