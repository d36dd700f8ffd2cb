// The OpenAPI document generated from the descriptors: valid OpenAPI 3.1, every binding of the wire contract
// (and of this server's own methods) present with its HTTP method and path, and the query parameters it lists
// accepted by the gateway's own query reader.
import { describe, expect, it } from "vitest";
import { Validator } from "@seriousme/openapi-schema-validator";
import { create, createFileRegistry, setExtension, type DescField, type DescMessage, type Message } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, MethodOptionsSchema } from "@bufbuild/protobuf/wkt";
import { http } from "../../gen/google/api/annotations_pb.js";
import { HttpRuleSchema } from "../../gen/google/api/http_pb.js";
import { createOpenApiDocument, type OpenApiDocument, type Operation, type Parameter, type Schema } from "../../src/gateway/openapi.js";
import { describeRestBindings } from "../../src/gateway/gateway.js";
import { applyQuery } from "../../src/gateway/query.js";
import { registry, serverFiles, servedMethods } from "../../src/kernel/descriptors.js";
import { loadContract, type ContractHttpRule } from "../support/contract-json.js";

const doc: OpenApiDocument = createOpenApiDocument({ methods: servedMethods });

/** "/iam/v2/groups/{parent=**}" and "/iam/v2/groups/{uid}" -> "/iam/v2/groups/{}": paths OpenAPI deems identical. */
function openApiShapeOf(template: string): string {
  return template.replace(/\{[^}]*\}/g, "{}");
}

/** The shape of the URL a path or template stands for: "/%69am/v2/groups/{parent}" -> "/iam/v2/groups/{}". */
function shapeOf(template: string): string {
  return openApiShapeOf(template).replace(/%[0-9A-F]{2}/gi, (e) => decodeURIComponent(e));
}

/** The operation for verb on the path of this shape, with the variables it binds ("Sets `x`."). */
function operationAt(verb: string, template: string): { path: string; operation: Operation } | undefined {
  const shape = shapeOf(template);
  for (const [path, item] of Object.entries(doc.paths)) {
    if (shapeOf(path) !== shape) continue;
    const operation = item[verb.toLowerCase()];
    if (operation) return { path, operation };
  }
  return undefined;
}

function parameter(op: Operation, name: string, where: "path" | "query" = "query"): Parameter | undefined {
  return op.parameters?.find((p) => p.name === name && p.in === where);
}

/** The component a $ref names. */
function component(ref: Schema): Schema {
  const name = String(ref.$ref).replace("#/components/schemas/", "");
  const schema = doc.components.schemas[name];
  if (!schema) throw new Error(`no component ${name}`);
  return schema;
}

function responseSchema(op: Operation): Schema {
  const ok = op.responses["200"] as { content: { "application/json": { schema: Schema } } };
  return ok.content["application/json"].schema;
}

describe("OpenAPI document", () => {
  it("is valid OpenAPI 3.1, every $ref resolving", async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(doc) as unknown as Record<string, unknown>);
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
    expect(validator.version).toBe("3.1");
    expect(() => validator.resolveRefs()).not.toThrow();
  });

  it("has every HTTP binding of the wire contract, with its method, path and the fields its variables set", () => {
    const contract = loadContract();
    const expected: Array<{ rpc: string; verb: string; template: string }> = [];
    const collect = (rpc: string, rule: ContractHttpRule) => {
      for (const verb of ["get", "put", "post", "delete", "patch"] as const) {
        const template = rule[verb];
        if (template) expected.push({ rpc, verb, template });
      }
      if (rule.custom) expected.push({ rpc, verb: rule.custom.kind, template: rule.custom.path });
      for (const more of rule.additionalBindings ?? []) collect(rpc, more);
    };
    for (const file of Object.values(contract.files)) {
      for (const [service, methods] of Object.entries(file.services ?? {})) {
        for (const [name, method] of Object.entries(methods)) if (method.http) collect(`${service}/${name}`, method.http);
      }
    }
    expect(expected.length).toBeGreaterThan(75);
    const missing: string[] = [];
    for (const e of expected) {
      const found = operationAt(e.verb, e.template);
      if (!found || !found.operation.description.includes(`RPC \`${e.rpc}\``)) {
        missing.push(`${e.verb.toUpperCase()} ${e.template} (${e.rpc})`);
        continue;
      }
      // Each variable of the template is a path parameter saying which request field it sets.
      const fields = [...e.template.matchAll(/\{([^}=]+)/g)].map((m) => m[1]!);
      const described = (found.operation.parameters ?? []).filter((p) => p.in === "path").map((p) => p.description);
      for (const f of fields) expect(described.some((d) => d?.startsWith(`Sets \`${f}\`.`)), `${e.template}: ${f}`).toBe(true);
    }
    expect(missing).toEqual([]);
  });

  it("has the bindings of this server's own methods (apiserver.*)", () => {
    const own = serverFiles.flatMap((f) => f.services.flatMap((s) => s.methods));
    const bindings = describeRestBindings(own);
    expect(bindings.length).toBeGreaterThan(0);
    for (const b of bindings) {
      const found = operationAt(b.verb, b.template);
      expect(found?.operation.description, `${b.verb} ${b.template}`).toContain(`RPC \`${b.method.parent.typeName}/${b.method.name}\``);
    }
  });

  it("lists nested and repeated query parameters by their JSON names", () => {
    const listRepos = operationAt("get", "/registry/v2/repos")!.operation;
    const childrenOf = parameter(listRepos, "uidp.childrenOf")!;
    expect(childrenOf.schema).toEqual({ type: "string" });
    expect(childrenOf.description).toContain("`uidp.children_of`");
    expect(parameter(listRepos, "pageSize")?.schema).toEqual({ type: "integer", format: "int32" });
    const listAdvisories = operationAt("get", "/vulnerabilities/v2/advisories")!.operation;
    const artifactNames = parameter(listAdvisories, "artifactNames")!;
    expect(artifactNames).toMatchObject({ schema: { type: "array", items: { type: "string" } }, style: "form", explode: true });
    // A singular message is listed by its fields only (the gateway takes its JSON object too, but Swagger UI
    // would send a listed one filled with a sample).
    expect(parameter(listRepos, "uidp")).toBeUndefined();
    // A repeated message: once per element, each its JSON object.
    const resolvedVulns = operationAt("get", "/advisory/v2/images/resolvedVulns")!.operation;
    const imageRefs = parameter(resolvedVulns, "imageRefs")!;
    expect(imageRefs).toMatchObject({
      schema: { type: "array", items: { $ref: "#/components/schemas/chainguard.platform.advisory.v2.ImageRef" } },
      style: "form",
      explode: true,
      example: [{ repo: "...", tags: ["..."] }],
    });
    expect(imageRefs.description).toContain('once per element, each value the element\'s proto3 JSON object, URL-encoded (`imageRefs={"repo":"...","tags":["..."]}&imageRefs={...}`)');
    expect(imageRefs.description).toContain("`image_refs`");
    expect(parameter(resolvedVulns, "startTime")?.schema).toMatchObject({ type: "string", format: "date-time" });
    // Path variables are not query parameters too.
    const getRepo = operationAt("get", "/registry/v2/repos/{uid=**}")!.operation;
    expect(parameter(getRepo, "uid")).toBeUndefined();
    expect(parameter(getRepo, "uid", "path")).toMatchObject({ required: true, schema: { type: "string" } });
    expect(parameter(getRepo, "uid", "path")?.description).toContain("May contain `/`");
    // body "*" carries the whole request: no query parameter at all.
    const batchCreate = operationAt("post", "/iam/v2/roleBindings:batchCreate")!.operation;
    expect(batchCreate.parameters ?? []).toEqual([]);
  });

  it("lists only query parameters the gateway accepts, under the names it lists", () => {
    let checked = 0;
    for (const b of describeRestBindings(servedMethods)) {
      const { operation } = operationAt(b.verb, b.template)!;
      for (const p of operation.parameters ?? []) {
        if (p.in !== "query") continue;
        const values = sampleParameterValues(p);
        const message = create(b.method.input) as Message;
        const set = applyQuery(b.method.input, message, values.map((v) => [p.name, v]), b.bound, registry);
        expect([...set].map((path) => jsonPathOf(b.method.input, path)), `${b.verb} ${b.template} ?${p.name}`).toEqual([p.name]);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(100);
  });

  it("writes responses in proto3 JSON: int64 as a string, Timestamp as date-time, enums by name", () => {
    const listRepos = operationAt("get", "/registry/v2/repos")!.operation;
    const response = component(responseSchema(listRepos));
    const properties = response.properties as Record<string, Schema>;
    expect(properties.totalCount).toMatchObject({ type: "string", format: "int64" });
    expect(properties.repos).toEqual({ type: "array", items: { $ref: "#/components/schemas/chainguard.platform.registry.v2.Repo" } });
    const group = doc.components.schemas["chainguard.platform.iam.v2.Group"]!;
    const groupProps = group.properties as Record<string, Schema>;
    expect(groupProps.createTime).toMatchObject({ type: "string", format: "date-time", readOnly: true });
    const status = component(groupProps.status!);
    expect(status.type).toBe("string");
    expect(status.enum).toEqual(registry.getEnum("chainguard.platform.iam.v2.OrgStatus")!.values.map((v) => v.name));
  });

  it("marks OUTPUT_ONLY fields readOnly and REQUIRED fields required", () => {
    const repo = doc.components.schemas["chainguard.platform.registry.v2.Repo"]!;
    expect((repo.properties as Record<string, Schema>).uid).toMatchObject({ type: "string", readOnly: true });
    const group = doc.components.schemas["chainguard.platform.iam.v2.Group"]!;
    expect(group.required).toContain("name");
    expect((group.properties as Record<string, Schema>).name?.readOnly).toBeUndefined();
  });

  it("describes a recursive message with a $ref to itself, and stops its query parameters at the recursion", async () => {
    // No API message is recursive today: a descriptor built here is.
    const options = create(MethodOptionsSchema);
    setExtension(options, http, create(HttpRuleSchema, { pattern: { case: "get", value: "/nodes/{name}" } }));
    const STRING = 9;
    const MESSAGE = 11;
    const OPTIONAL = 1;
    const REPEATED = 3;
    const file = createFileRegistry(
      create(FileDescriptorProtoSchema, {
        name: "test/node.proto",
        package: "test",
        syntax: "proto3",
        messageType: [
          {
            name: "Node",
            field: [
              { name: "name", jsonName: "name", number: 1, type: STRING, label: OPTIONAL },
              { name: "parent_node", jsonName: "parentNode", number: 2, type: MESSAGE, typeName: ".test.Node", label: OPTIONAL },
              { name: "children", jsonName: "children", number: 3, type: MESSAGE, typeName: ".test.Node", label: REPEATED },
            ],
          },
        ],
        service: [{ name: "NodeService", method: [{ name: "GetNode", inputType: ".test.Node", outputType: ".test.Node", options }] }],
      }),
      () => undefined,
    );
    const service = file.getService("test.NodeService")!;
    const nodeDoc = createOpenApiDocument({ methods: service.methods });
    const node = nodeDoc.components.schemas["test.Node"]!;
    expect(node.properties).toEqual({
      name: { type: "string" },
      parentNode: { $ref: "#/components/schemas/test.Node" },
      children: { type: "array", items: { $ref: "#/components/schemas/test.Node" } },
    });
    const get = nodeDoc.paths["/nodes/{name}"]!.get!;
    // The repeated one as JSON elements; the singular one neither field by field (recursion) nor whole.
    expect(get.parameters?.map((p) => `${p.in} ${p.name}`)).toEqual(["path name", "query children"]);
    const validator = new Validator();
    expect((await validator.validate(structuredClone(nodeDoc) as unknown as Record<string, unknown>)).valid).toBe(true);
  });

  it("answers errors with google.rpc.Status, its details typed by @type", () => {
    const ping = operationAt("get", "/ping/v2/ping")!.operation;
    expect(ping.responses.default).toEqual({ $ref: "#/components/responses/Error" });
    const error = doc.components.responses.Error as { content: { "application/json": { schema: Schema } } };
    const status = component(error.content["application/json"].schema);
    const details = (status.properties as Record<string, Schema>).details as { items: { oneOf: Array<{ allOf: Schema[] }> } };
    const types = details.items.oneOf.map((v) => ((v.allOf[1]!.properties as Record<string, Schema>)["@type"] as { const: string }).const);
    for (const t of ["ErrorInfo", "BadRequest", "ResourceInfo", "PreconditionFailure", "RetryInfo"]) {
      expect(types).toContain(`type.googleapis.com/google.rpc.${t}`);
    }
    const badRequest = doc.components.schemas["google.rpc.BadRequest"]!;
    expect((badRequest.properties as Record<string, Schema>).fieldViolations).toEqual({
      type: "array",
      items: { $ref: "#/components/schemas/google.rpc.BadRequest.FieldViolation" },
    });
  });

  it("says how lists page: the default page size and its cap, on the document and on every pageSize", () => {
    expect(doc.info.description).toMatch(/`pageSize` rows \(50 when it is 0 or absent, at most 200/);
    let lists = 0;
    for (const item of Object.values(doc.paths)) {
      for (const op of Object.values(item)) {
        const p = parameter(op, "pageSize");
        if (!p) continue;
        lists++;
        expect(p.description, op.operationId).toMatch(/^Rows per page: `pageSize` rows \(50 when it is 0 or absent, at most 200: a larger value gets 200/);
      }
    }
    expect(lists).toBeGreaterThanOrEqual(17);
  });

  it("needs a bearer token, except where the method's auth rule is disabled", () => {
    expect(doc.components.securitySchemes.bearerAuth).toEqual(expect.objectContaining({ type: "http", scheme: "bearer", bearerFormat: "JWT" }));
    // Swagger UI's Authorize dialog shows this text and adds "Bearer " itself: a pasted "Bearer <token>" would go
    // out as "Bearer Bearer <token>".
    expect((doc.components.securitySchemes.bearerAuth as { description: string }).description).toMatch(/^Paste the token alone, without `Bearer `.*`npm start` printed/);
    expect(doc.security).toEqual([{ bearerAuth: [] }]);
    expect(operationAt("get", "/ping/v2/ping")!.operation.security).toEqual([]);
    expect(operationAt("get", "/advisory/v2/documents")!.operation.security).toEqual([]);
    expect(operationAt("get", "/iam/v2/groups")!.operation.security).toBeUndefined();
    // The token exchange checks no token in the interceptor, but its handler reads the bearer it exchanges.
    expect(operationAt("post", "/sts/exchange")!.operation.security).toBeUndefined();
    expect(operationAt("post", "/sts/exchange_refresh_token")!.operation.security).toBeUndefined();
  });

  it("names each operation's path parameters after its own request fields, on paths OpenAPI tells apart", () => {
    // One URL shape, three sets of names: the first on the plain path, the others on the same URL written with
    // one more literal character percent-encoded.
    const item = Object.fromEntries(Object.entries(doc.paths).filter(([path]) => shapeOf(path) === "/iam/v2/groups/{}"));
    expect(Object.keys(item)).toEqual(["/iam/v2/groups/{uid}", "/%69am/v2/groups/{parent}", "/%69%61m/v2/groups/{group.uid}"]);
    expect(Object.keys(item["/iam/v2/groups/{uid}"]!).sort()).toEqual(["delete", "get"]);
    expect(parameter(item["/%69am/v2/groups/{parent}"]!.post!, "parent", "path")?.description).toMatch(/^Sets `parent`\./);
    expect(item["/%69am/v2/groups/{parent}"]!.post!.description).toContain("it is the URL `/iam/v2/groups/{parent}`");
    expect(parameter(item["/%69%61m/v2/groups/{group.uid}"]!.patch!, "group.uid", "path")?.description).toMatch(/^Sets `group\.uid`\./);
    // Every operation: its path parameters are its template's fields, by name, in order.
    let checked = 0;
    for (const b of describeRestBindings(servedMethods)) {
      const { path, operation } = operationAt(b.verb, b.template)!;
      const fields = [...b.template.matchAll(/\{([^}=]+)/g)].map((m) => m[1]!);
      expect(operation.parameters?.filter((p) => p.in === "path").map((p) => p.name) ?? [], `${b.verb} ${b.template}`).toEqual(fields);
      expect([...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!)).toEqual(fields);
      checked++;
    }
    expect(checked).toBeGreaterThan(75);
    // No two paths OpenAPI would deem identical; operation ids unique.
    const shapes = Object.keys(doc.paths).map(openApiShapeOf);
    expect(new Set(shapes).size).toBe(shapes.length);
    const ids = Object.values(doc.paths).flatMap((i) => Object.values(i).map((o) => o.operationId));
    expect(new Set(ids).size).toBe(ids.length);
  });
});

/** Query values for the parameter: its example's elements as JSON text for a repeated message, else values of its type. */
function sampleParameterValues(p: Parameter): string[] {
  const items = p.schema.items as Schema | undefined;
  if (items?.$ref !== undefined && component(items).type === "object") {
    expect(Array.isArray(p.example), `${p.name}: an example of its JSON elements`).toBe(true);
    return (p.example as unknown[]).map((e) => JSON.stringify(e));
  }
  return sampleValues(p.schema);
}

/** Query values of the parameter's type (two for a repeated parameter). */
function sampleValues(schema: Schema): string[] {
  if (schema.type === "array") return [...sampleValues(schema.items as Schema), ...sampleValues(schema.items as Schema)];
  if (typeof schema.$ref === "string") return [(component(schema).enum as string[])[0]!];
  if (schema.type === "integer" || schema.type === "number") return ["1"];
  if (schema.type === "boolean") return ["true"];
  if (schema.format === "int64" || schema.format === "uint64") return ["1"];
  if (schema.format === "date-time") return ["2024-01-02T03:04:05Z"];
  if (typeof schema.pattern === "string" && schema.pattern.endsWith("s$")) return ["1.5s"];
  if (schema.format === "byte") return ["AQID"];
  return ["x"];
}

/** "uidp.children_of" -> "uidp.childrenOf". */
function jsonPathOf(desc: DescMessage, protoPath: string): string {
  const out: string[] = [];
  let d: DescMessage | undefined = desc;
  for (const name of protoPath.split(".")) {
    const field: DescField | undefined = d?.fields.find((f) => f.name === name);
    if (!field) return protoPath;
    out.push(field.jsonName);
    d = field.fieldKind === "message" ? field.message : undefined;
  }
  return out.join(".");
}
