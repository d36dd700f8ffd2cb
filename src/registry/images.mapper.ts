// What a manifest row says about platforms, and how a requested architecture selects one. Pure functions.
//
// A platform is stored "os/architecture[/variant]" (as the import writes it: "linux/amd64", "linux/arm/v7").
// It is answered as the published SDK names architectures (architectureName): "amd64", "arm64"; a variant
// is kept where it tells images apart ("arm/v7"; arm64's v8 is implied), and an os other than linux is kept
// in front ("windows/amd64"). A request may name an architecture so ("amd64": any os; "arm/v7": linux), or
// as a platform: an os and architecture ("linux/arm64": any variant) or all three. Index entries with no
// platform, or "unknown/unknown" (the attestation manifests BuildKit adds to an index), provide no platform
// and are skipped.
import type { ManifestRow } from "../db/schema/index.js";

export interface PlatformEntry {
  platform: string;
  /** The image manifest that provides it: the manifest itself, or the index child. */
  digest: string;
}


/** An architecture as a request may give it: one to three segments of [a-z0-9._-]. */
export const ARCHITECTURE_PATTERN = /^[a-z0-9._-]+(?:\/[a-z0-9._-]+){0,2}$/;

function provides(platform: string | undefined | null): platform is string {
  return !!platform && platform !== "unknown/unknown" && !platform.startsWith("unknown/");
}

/** The platforms a manifest provides: an index's children (in index order), or an image's own platform. */
export function platformEntries(m: Pick<ManifestRow, "isIndex" | "platform" | "children" | "digest">): PlatformEntry[] {
  if (!m.isIndex) return provides(m.platform) ? [{ platform: m.platform, digest: m.digest }] : [];
  const out: PlatformEntry[] = [];
  for (const child of m.children ?? []) if (provides(child.platform)) out.push({ platform: child.platform, digest: child.digest });
  return out;
}

/** A platform as the SDK names its architecture: "linux/amd64" -> "amd64", "linux/arm64/v8" -> "arm64", "linux/arm/v7" -> "arm/v7". */
export function architectureName(platform: string): string {
  const [os, arch, variant] = platform.split("/");
  const archVariant = variant === undefined || (arch === "arm64" && variant === "v8") ? arch! : `${arch}/${variant}`;
  return os === "linux" ? archVariant : `${os}/${archVariant}`;
}

/** The distinct architectures, as the SDK names them, in order. */
export function architecturesOf(entries: readonly PlatformEntry[]): string[] {
  return [...new Set(entries.map((e) => architectureName(e.platform)))];
}

/** True when `platform` is what `requested` names (see the rules at the top of this file). */
function platformMatches(platform: string, requested: string): boolean {
  const [os, arch, variant] = platform.split("/");
  const want = requested.split("/");
  // arm64 without a variant is arm64/v8.
  const v = variant ?? (arch === "arm64" ? "v8" : undefined);
  switch (want.length) {
    case 1:
      return arch === want[0];
    case 2:
      // "linux/arm64" (os/architecture), or "arm/v7" (a linux architecture/variant, as architectureName gives it).
      return (os === want[0] && arch === want[1]) || (os === "linux" && arch === want[0] && (v === want[1] || (want[0] === "arm64" && want[1] === "v8" && v === undefined)));
    default:
      return os === want[0] && arch === want[1] && (v === want[2] || (want[1] === "arm64" && want[2] === "v8" && v === undefined));
  }
}

/** The entries `requested` selects; an exact platform or architecture name match wins over looser ones. */
export function selectPlatform(entries: readonly PlatformEntry[], requested: string): PlatformEntry[] {
  const exact = entries.filter((e) => e.platform === requested || architectureName(e.platform) === requested);
  if (exact.length > 0) return exact;
  return entries.filter((e) => platformMatches(e.platform, requested));
}
