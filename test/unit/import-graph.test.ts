// The import graph of src/ (scripts/import-graph.ts): no arrow from a lower layer to a higher one except to
// the configuration and logging, none between the server and a domain, and no circle of files.
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { cycles, importGraph, layerViolations, type Edge } from "../../scripts/import-graph.js";

const edge = (from: string, to: string): Edge => ({ from, to });

describe("import graph of src/", () => {
  const edges = importGraph(fileURLToPath(new URL("../../src", import.meta.url)));

  it("reads the imports, type-only ones included", () => {
    expect(edges.length).toBeGreaterThan(500);
    expect(edges).toContainEqual(edge("compose.ts", "modules.ts"));
    expect(edges).toContainEqual(edge("server/app.ts", "kernel/module.ts"));
  });

  it("has no arrow against the layers", () => {
    expect(layerViolations(edges)).toEqual([]);
  });

  it("has no circle", () => {
    expect(cycles(edges)).toEqual([]);
  });
});

describe("the checks", () => {
  it.each([
    ["a domain importing the server", edge("iam/groups.service.ts", "server/app.ts")],
    ["the server importing a domain", edge("server/app.ts", "iam/index.ts")],
    ["the kernel importing a domain", edge("kernel/auth/keys.ts", "iam/directory.ts")],
    ["the configuration importing a domain", edge("config.ts", "iam/secret-box.ts")],
    ["a domain importing the composition root", edge("registry/index.ts", "modules.ts")],
  ])("find %s", (_, e) => {
    expect(layerViolations([e])).toEqual([e]);
  });

  it.each([
    ["a domain importing the kernel", edge("iam/groups.service.ts", "kernel/module.ts")],
    ["a domain importing another", edge("advisory/image-ref.ts", "registry/repos.validate.ts")],
    ["anything importing the configuration or logging", edge("db/client.ts", "config.ts")],
    ["the root importing a domain", edge("compose.ts", "iam/index.ts")],
  ])("allow %s", (_, e) => {
    expect(layerViolations([e])).toEqual([]);
  });

  it("find each circle once, with its files", () => {
    const found = cycles([edge("a.ts", "b.ts"), edge("b.ts", "c.ts"), edge("c.ts", "a.ts"), edge("c.ts", "d.ts"), edge("d.ts", "d.ts")]);
    expect(found).toEqual(expect.arrayContaining([["a.ts", "b.ts", "c.ts"], ["d.ts"]]));
    expect(found).toHaveLength(2);
  });
});
