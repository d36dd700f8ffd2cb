// The ecosystems' version orders on their published examples: Maven's ComparableVersion (the examples of the
// maven-artifact documentation and its test suite) and PEP 440 (the ordering example of the specification).
import { describe, expect, it } from "vitest";
import { compareMavenVersions, comparePep440Versions } from "../../src/libraries/versions.js";
import { normalizePythonName } from "../../src/libraries/ecosystems.js";

function expectAscending(cmp: (a: string, b: string) => number, list: readonly string[]) {
  for (let i = 0; i < list.length; i++) {
    for (let j = 0; j < list.length; j++) {
      expect(Math.sign(cmp(list[i]!, list[j]!)), `${list[i]} vs ${list[j]}`).toBe(Math.sign(i - j));
    }
  }
}

describe("Maven ComparableVersion", () => {
  it("orders qualifiers: alpha < beta < milestone < rc < snapshot < release < sp", () => {
    expectAscending(compareMavenVersions, ["1.0-alpha-1", "1.0-beta-1", "1.0-milestone-1", "1.0-rc-1", "1.0-SNAPSHOT", "1.0", "1.0-sp-1", "1.0.1", "1.1", "2"]);
  });

  it("treats 1 = 1.0 = 1.ga = 1-ga = 1.final = 1-0", () => {
    for (const v of ["1.0", "1.ga", "1-ga", "1.final", "1-0", "1.0.0", "1-release"]) expect(compareMavenVersions("1", v), v).toBe(0);
  });

  it("expands one-letter qualifiers followed by a digit and aliases cr to rc", () => {
    expect(compareMavenVersions("1-a1", "1-alpha-1")).toBe(0);
    expect(compareMavenVersions("1-b2", "1-beta-2")).toBe(0);
    expect(compareMavenVersions("1-m3", "1-milestone-3")).toBe(0);
    expect(compareMavenVersions("1-cr1", "1-rc1")).toBe(0);
  });

  it("follows the documented examples", () => {
    expectAscending(compareMavenVersions, ["1", "1.1"]);
    expectAscending(compareMavenVersions, ["1-snapshot", "1", "1-sp"]);
    expectAscending(compareMavenVersions, ["1-foo2", "1-foo10"]);
    expectAscending(compareMavenVersions, ["1-foo", "1-1", "1.1"]);
    expect(compareMavenVersions("1.foo", "1-foo")).toBe(0);
    expect(compareMavenVersions("1-sp", "1-ga")).toBe(1);
    expect(compareMavenVersions("1-sp.1", "1-ga.1")).toBe(1);
    // Unknown qualifiers come after known ones, among themselves by text; numbers compare numerically.
    expectAscending(compareMavenVersions, ["1.0-sp", "1.0-abc", "1.0-xyz"]);
    expectAscending(compareMavenVersions, ["2.9", "2.10", "10.0", "12345678901234567890.1"]);
  });
});

describe("PEP 440", () => {
  it("orders the specification's example", () => {
    expectAscending(comparePep440Versions, [
      "1.dev0", "1.0.dev456", "1.0a1", "1.0a2.dev456", "1.0a12.dev456", "1.0a12", "1.0b1.dev456", "1.0b2", "1.0b2.post345.dev456",
      "1.0b2.post345", "1.0rc1.dev456", "1.0rc1", "1.0+abc.5", "1.0+abc.7", "1.0+5", "1.0.post456.dev34", "1.0.post456", "1.0.15", "1.1.dev1",
    ]);
  });

  it("normalizes spellings and ignores trailing zeros", () => {
    for (const [a, b] of [["1.0", "1"], ["1.0.0", "1"], ["1.0alpha1", "1.0a1"], ["1.0-c1", "1.0rc1"], ["1.0-1", "1.0.post1"], ["v1.0", "1.0"], ["1!1.0", "1!1"], ["1.0.DEV", "1.0.dev0"]] as const) {
      expect(comparePep440Versions(a, b), `${a} = ${b}`).toBe(0);
    }
    expect(comparePep440Versions("1!0.1", "2.0")).toBe(1);
  });

  it("puts strings that are not versions first", () => {
    expectAscending(comparePep440Versions, ["not a version", "0.0.1", "1.0"]);
  });

  it("normalizes names as PEP 503 says", () => {
    expect(normalizePythonName("Friendly-Bard")).toBe("friendly-bard");
    expect(normalizePythonName("FRIENDLY._-BARD")).toBe("friendly-bard");
    expect(normalizePythonName("zope.interface")).toBe("zope-interface");
  });
});
