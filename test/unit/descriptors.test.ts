// Policy the server reads from the descriptors must be complete: every API method has an HTTP binding and an
// authorization rule, mutations carry the contract's event, scoped rules find their scope in the request, and
// no rule lists the UNKNOWN capability.
import { create, createFileRegistry, setExtension, type DescMethod } from "@bufbuild/protobuf";
import { FieldDescriptorProto_Type, FileDescriptorProtoSchema, FieldOptionsSchema, MethodOptionsSchema } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { auth, AuthRuleSchema, event, EventRuleSchema, iam_scope } from "../../gen/apiserver/options/v1/options_pb.js";
import { Capability, CapabilitySchema } from "../../gen/capabilities/capabilities_pb.js";
import { http } from "../../gen/google/api/annotations_pb.js";
import { HttpRuleSchema } from "../../gen/google/api/http_pb.js";
import { apiMethods, authRuleOf, eventRuleOf, httpRuleOf, scopePathOf, servedMethods, serverFiles } from "../../src/kernel/descriptors.js";
import { contractMethodOf, loadContract, type ContractMethod } from "../support/contract-json.js";

const contract = loadContract();

function nameOf(method: DescMethod): string {
  return `${method.parent.typeName}.${method.name}`;
}

type ProblemKind = "http" | "auth" | "event" | "scope" | "capability";

interface Problem {
  kind: ProblemKind;
  /** "Service.Method: what is wrong" */
  message: string;
}

/** What is wrong with a method's policy options; empty when nothing is. */
function policyProblems(method: DescMethod, contractMethod: ContractMethod | undefined): Problem[] {
  const problems: Problem[] = [];
  const add = (kind: ProblemKind, what: string): void => {
    problems.push({ kind, message: `${nameOf(method)}: ${what}` });
  };

  if (httpRuleOf(method)?.pattern.case === undefined) add("http", "no google.api.http binding");

  const authRule = authRuleOf(method);
  if (authRule?.mode.case === undefined) {
    add("auth", "no auth rule");
  } else if (authRule.mode.case === "enabled") {
    const { capabilities, unscoped } = authRule.mode.value;
    for (const cap of capabilities) {
      if (cap === Capability.UNKNOWN || CapabilitySchema.value[cap] === undefined) {
        add("capability", `auth lists capability ${CapabilitySchema.value[cap]?.name ?? cap}`);
      }
    }
    if (!unscoped && !scopePathOf(method.input)) {
      add("scope", `scoped auth rule but ${method.input.typeName} has no iam_scope field`);
    }
  }

  const expected = contractMethod?.event;
  if (expected) {
    const ev = eventRuleOf(method);
    if (!ev) add("event", `no event option (contract: ${expected.type})`);
    else if (ev.type !== expected.type) add("event", `event type ${ev.type}, contract: ${expected.type}`);
  }
  return problems;
}

function problemsOf(methods: readonly DescMethod[], contractOf: (m: DescMethod) => ContractMethod | undefined): Problem[] {
  return methods.flatMap((m) => policyProblems(m, contractOf(m)));
}

describe("this server's own methods (serverFiles)", () => {
  const own = serverFiles.flatMap((f) => f.services.flatMap((s) => s.methods));

  it("live in apiserver.* packages, outside the contract, each with an HTTP binding and an authorization rule", () => {
    expect(own.length).toBeGreaterThan(0);
    for (const m of own) {
      expect(m.parent.typeName.startsWith("apiserver."), nameOf(m)).toBe(true);
      expect(contractMethodOf(contract, m), nameOf(m)).toBeUndefined();
      expect(apiMethods, nameOf(m)).not.toContain(m);
    }
    expect(problemsOf(own, () => undefined).map((p) => p.message)).toEqual([]);
  });

  it("are served beside the API's", () => {
    for (const m of [...apiMethods, ...own]) expect(servedMethods).toContain(m);
  });
});

describe("API method descriptors", () => {
  const problems = problemsOf(apiMethods, (m) => contractMethodOf(contract, m));
  const messages = (kind: ProblemKind): string[] => problems.filter((p) => p.kind === kind).map((p) => p.message);
  const contractMethodCount = Object.values(contract.files)
    .flatMap((f) => Object.values(f.services ?? {}))
    .reduce((n, methods) => n + Object.keys(methods).length, 0);

  it("cover every method of the contract, and no other (this server's own are served beside them)", () => {
    expect(apiMethods.length).toBe(contractMethodCount);
    expect(apiMethods.filter((m) => !contractMethodOf(contract, m)).map(nameOf)).toEqual([]);
  });

  it("every method has an HTTP binding", () => {
    expect(messages("http")).toEqual([]);
  });

  it("every method has an authorization rule", () => {
    expect(messages("auth")).toEqual([]);
  });

  it("every mutation the contract gives an event carries that event", () => {
    expect(apiMethods.filter((m) => contractMethodOf(contract, m)?.event).length).toBeGreaterThan(0);
    expect(messages("event")).toEqual([]);
  });

  it("every scoped rule finds an iam_scope field in the request", () => {
    expect(messages("scope")).toEqual([]);
  });

  it("no rule lists the UNKNOWN capability", () => {
    expect(messages("capability")).toEqual([]);
  });

  it("the checks catch broken methods, by name", () => {
    // A throwaway file: one method per defect, and one that is fine.
    const withOptions = (opts: { http?: boolean; auth?: "disabled" | "scoped" | "unscoped" | "unknown"; event?: string }) => {
      const options = create(MethodOptionsSchema);
      if (opts.http !== false) setExtension(options, http, create(HttpRuleSchema, { pattern: { case: "get", value: "/x" } }));
      if (opts.auth === "disabled") setExtension(options, auth, create(AuthRuleSchema, { mode: { case: "disabled", value: {} } }));
      if (opts.auth === "scoped" || opts.auth === "unscoped" || opts.auth === "unknown") {
        setExtension(
          options,
          auth,
          create(AuthRuleSchema, {
            mode: {
              case: "enabled",
              value: {
                capabilities: opts.auth === "unknown" ? [Capability.UNKNOWN] : [Capability.CAP_IAM_GROUPS_LIST],
                unscoped: opts.auth === "unscoped",
              },
            },
          }),
        );
      }
      if (opts.event) setExtension(options, event, create(EventRuleSchema, { type: opts.event }));
      return options;
    };
    const scopeOptions = create(FieldOptionsSchema);
    setExtension(scopeOptions, iam_scope, true);
    const proto = create(FileDescriptorProtoSchema, {
      name: "test/broken.proto",
      package: "test.broken",
      syntax: "proto3",
      messageType: [
        { name: "Unscoped", field: [{ name: "uid", number: 1, type: FieldDescriptorProto_Type.STRING, jsonName: "uid" }] },
        {
          name: "Scoped",
          field: [{ name: "uid", number: 1, type: FieldDescriptorProto_Type.STRING, jsonName: "uid", options: scopeOptions }],
        },
      ],
      service: [
        {
          name: "Broken",
          method: [
            { name: "Fine", inputType: ".test.broken.Scoped", outputType: ".test.broken.Scoped", options: withOptions({ auth: "scoped", event: "e.v1" }) },
            { name: "NoHttp", inputType: ".test.broken.Scoped", outputType: ".test.broken.Scoped", options: withOptions({ http: false, auth: "disabled" }) },
            { name: "NoAuth", inputType: ".test.broken.Scoped", outputType: ".test.broken.Scoped", options: withOptions({}) },
            { name: "NoScope", inputType: ".test.broken.Unscoped", outputType: ".test.broken.Scoped", options: withOptions({ auth: "scoped" }) },
            { name: "Unknown", inputType: ".test.broken.Scoped", outputType: ".test.broken.Scoped", options: withOptions({ auth: "unknown" }) },
            { name: "NoEvent", inputType: ".test.broken.Scoped", outputType: ".test.broken.Scoped", options: withOptions({ auth: "unscoped" }) },
            { name: "WrongEvent", inputType: ".test.broken.Scoped", outputType: ".test.broken.Scoped", options: withOptions({ auth: "disabled", event: "other.v1" }) },
          ],
        },
      ],
    });
    const file = createFileRegistry(proto, () => undefined).getFile("test/broken.proto");
    const methods = file?.services[0]?.methods ?? [];
    expect(methods).toHaveLength(7);
    const withEvent = new Set(["Fine", "NoEvent", "WrongEvent"]);
    const got = problemsOf(methods, (m) => (withEvent.has(m.name) ? { input: "", output: "", event: { type: "e.v1" } } : undefined));
    expect(got.map((p) => p.message)).toEqual([
      "test.broken.Broken.NoHttp: no google.api.http binding",
      "test.broken.Broken.NoAuth: no auth rule",
      "test.broken.Broken.NoScope: scoped auth rule but test.broken.Unscoped has no iam_scope field",
      "test.broken.Broken.Unknown: auth lists capability UNKNOWN",
      "test.broken.Broken.NoEvent: no event option (contract: e.v1)",
      "test.broken.Broken.WrongEvent: event type other.v1, contract: e.v1",
    ]);
  });
});

describe("option readers", () => {
  // The hot path asks for a method's rules on every request; an option read decodes a new message each time.
  it("read each descriptor's option once and give the same answer after", () => {
    const withEvent = apiMethods.find((m) => eventRuleOf(m) !== undefined)!;
    const scoped = apiMethods.find((m) => scopePathOf(m.input) !== undefined)!;
    for (const m of apiMethods.slice(0, 5)) {
      expect(httpRuleOf(m)).toBeDefined();
      expect(httpRuleOf(m)).toBe(httpRuleOf(m));
      expect(authRuleOf(m)).toBe(authRuleOf(m));
    }
    expect(eventRuleOf(withEvent)).toBe(eventRuleOf(withEvent));
    expect(scopePathOf(scoped.input)).toBe(scopePathOf(scoped.input));
  });
});
