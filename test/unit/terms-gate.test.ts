// The terms gate's start-up checks (a marked name must be a unary scoped method of the API) and its
// decision, on a fake store; the protocols are covered by test/contract/terms.contract.test.ts.
import { create } from "@bufbuild/protobuf";
import type { ConnectError} from "@connectrpc/connect";
import { createContextValues, type UnaryRequest } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { CreateRepoRequestSchema, ReposService } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { TermsNotAcceptedDetailSchema } from "../../gen/chainguard/platform/iam/v2/terms_pb.js";
import { apiMethods } from "../../src/kernel/descriptors.js";
import { createTermsGate } from "../../src/kernel/terms-gate.js";

const documents = [
  { id: "tos", label: "Terms", url: "https://legal.example.com/tos" },
  { id: "aup", label: "Use", url: "https://legal.example.com/aup" },
];
const CREATE_REPO = "chainguard.platform.registry.v2.ReposService/CreateRepo";

describe("terms gate", () => {
  it("is off when nothing is marked", () => {
    expect(createTermsGate({ documents, requiredFor: [], methods: apiMethods, accepted: async () => new Set() })).toBeUndefined();
  });

  it.each([
    ["chainguard.platform.registry.v2.ReposService/Nothing", /is not a method of the API/],
    // Unscoped: no group in the request to take the organization from.
    ["chainguard.platform.registry.v2.ReposService/ListRepos", /only scoped methods/],
    ["chainguard.platform.iam.v2.GroupsService/CreateGroup", /only scoped methods/],
  ])("refuses to start when %s is marked", (name, message) => {
    expect(() => createTermsGate({ documents, requiredFor: [name], methods: apiMethods, accepted: async () => new Set() })).toThrow(message);
  });

  it("asks for the acceptances of the scope and lists what is missing, in configured order", async () => {
    const asked: string[] = [];
    const gate = createTermsGate({
      documents,
      requiredFor: [CREATE_REPO],
      methods: apiMethods,
      accepted: async (uid) => (asked.push(uid), new Set(["aup"])),
    })!;
    const request = {
      stream: false,
      method: ReposService.method.createRepo,
      message: create(CreateRepoRequestSchema, { parent: "aaaa/bbbb" }),
      contextValues: createContextValues(),
    } as unknown as UnaryRequest;
    let ran = false;
    const err = await gate(async () => {
      ran = true;
      return undefined as never;
    })(request).catch((e: unknown) => e);
    expect(ran).toBe(false);
    expect(asked).toEqual(["aaaa/bbbb"]);
    const detail = (err as ConnectError).findDetails(TermsNotAcceptedDetailSchema)[0];
    expect(detail?.missing.map((m) => m.id)).toEqual(["tos"]);
  });
});
