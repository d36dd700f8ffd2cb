// The ecosystems: their uid prefix, name normalization and version order.
import { Ecosystem } from "../../gen/chainguard/platform/libraries/v2/artifacts_pb.js";
import { compareMavenVersions, comparePep440Versions } from "./versions.js";

export const ecosystems = [Ecosystem.JAVA, Ecosystem.PYTHON] as const;

/** The first component of an artifact uid: "maven/junit:junit", "pypi/requests". */
export function ecosystemPrefix(e: Ecosystem): string {
  if (e === Ecosystem.JAVA) return "maven";
  if (e === Ecosystem.PYTHON) return "pypi";
  throw new Error(`no ecosystem ${e}`);
}

/** PEP 503: lowercase, runs of "-", "_" and "." become one "-". */
export function normalizePythonName(name: string): string {
  return name.toLowerCase().replace(/[-_.]+/g, "-");
}

export function compareVersions(e: Ecosystem, a: string, b: string): number {
  return e === Ecosystem.PYTHON ? comparePep440Versions(a, b) : compareMavenVersions(a, b);
}
