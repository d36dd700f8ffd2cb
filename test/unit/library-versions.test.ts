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

// Maven 3.9's lists (after MNG-7644, a qualifier after "." reads as after "-": "2.0.a" sorts between "2.0" and
// "2-1"; older releases put "2.0.0.a" here and ordered "2.0.a" after "2-1").
describe("Maven ComparableVersion, the orderings of maven-artifact's ComparableVersionTest", () => {
  it("orders qualifiers", () => {
    expectAscending(compareMavenVersions, [
      "1-alpha2snapshot", "1-alpha2", "1-alpha-123", "1-beta-2", "1-beta123", "1-m2", "1-m11", "1-rc", "1-cr2", "1-rc123", "1-SNAPSHOT", "1",
      "1-sp", "1-sp2", "1-sp123", "1-abc", "1-def", "1-pom-1", "1-1-snapshot", "1-1", "1-2", "1-123",
    ]);
  });

  it("orders numbers", () => {
    expectAscending(compareMavenVersions, [
      "2.0", "2.0.a", "2-1", "2.0.2", "2.0.123", "2.1.0", "2.1-a", "2.1b", "2.1-c", "2.1-1", "2.1.0.1", "2.2", "2.123", "11.a2",
      "11.a11", "11.b2", "11.b11", "11.m2", "11.m11", "11", "11.a", "11b", "11c", "11m",
    ]);
  });

  it("treats equal spellings as equal", () => {
    const pairs = [
      ["1", "1.0.0"], ["1.0", "1.0.0"], ["1", "1.0-0"], ["1.0", "1.0-0"], ["1a", "1-a"], ["1a", "1.0-a"], ["1a", "1.0.0-a"], ["1.0a", "1.0.a"],
      ["1.0.0a", "1.0.0.a"], ["1x", "1.x"], ["1x", "1-x"], ["1x", "1.0-x"], ["1x", "1.0.0-x"], ["1.0x", "1.0.x"], ["1.0.0x", "1.0.0.x"],
      ["1ga", "1"], ["1final", "1"], ["1cr", "1rc"], ["1a1", "1alpha1"], ["1b2", "1beta2"], ["1m3", "1milestone3"], ["1X", "1x"], ["1A", "1a"],
      ["1Ga", "1"], ["1FINAL", "1"], ["1Cr", "1Rc"], ["1m3", "1MileStone3"], ["1-abcdefghijklmnopqrstuvwxyz", "1-ABCDEFGHIJKLMNOPQRSTUVWXYZ"],
    ] as const;
    for (const [a, b] of pairs) expect(compareMavenVersions(a, b), `${a} = ${b}`).toBe(0);
  });

  it("orders the pairs", () => {
    const pairs = [
      ["1", "2"], ["1.5", "2"], ["1", "2.5"], ["1.0", "1.1"], ["1.0.0", "1.1"], ["1.0.1", "1.1"], ["1.1", "1.2.0"], ["1.0-alpha-1", "1.0-alpha-2"],
      ["1.0-beta-1", "1.0-SNAPSHOT"], ["1.0-alpha-1-SNAPSHOT", "1.0-alpha-1"], ["1.0", "1.0-1"], ["1.0-1", "1.0-2"], ["1.0.0", "1.0-1"],
      ["2.0-1", "2.0.1"], ["2.0.1-klm", "2.0.1-lmn"], ["2.0.1", "2.0.1-xyz"], ["2.0.1", "2.0.1-123"], ["2.0.1-xyz", "2.0.1-123"],
    ] as const;
    for (const [a, b] of pairs) {
      expect(compareMavenVersions(a, b), `${a} < ${b}`).toBe(-1);
      expect(compareMavenVersions(b, a), `${b} > ${a}`).toBe(1);
    }
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
