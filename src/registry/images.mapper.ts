// What a manifest row says about platforms, and how a requested architecture selects one. Pure functions.
//
// A platform is "os/architecture[/variant]" (as the import writes it: "linux/amd64", "linux/arm/v7"). A
// request may name an architecture alone ("amd64": any os), an os and architecture ("linux/arm64": any
// variant) or all three. Index entries with no platform, or "unknown/unknown" (the attestation manifests
// BuildKit adds to an index), provide no platform and are skipped.
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

/** The distinct platforms, in order. */
export function architecturesOf(entries: readonly PlatformEntry[]): string[] {
  return [...new Set(entries.map((e) => e.platform))];
}

/** True when `platform` is what `requested` names (see the rules at the top of this file). */
export function platformMatches(platform: string, requested: string): boolean {
  const [os, arch, variant] = platform.split("/");
  const want = requested.split("/");
  // arm64 without a variant is arm64/v8.
  const v = variant ?? (arch === "arm64" ? "v8" : undefined);
  switch (want.length) {
    case 1:
      return arch === want[0];
    case 2:
      return os === want[0] && arch === want[1];
    default:
      return os === want[0] && arch === want[1] && (v === want[2] || (want[1] === "arm64" && want[2] === "v8" && v === undefined));
  }
}

/** The entries `requested` selects; an exact platform match wins over looser ones. */
export function selectPlatform(entries: readonly PlatformEntry[], requested: string): PlatformEntry[] {
  const exact = entries.filter((e) => e.platform === requested);
  if (exact.length > 0) return exact;
  return entries.filter((e) => platformMatches(e.platform, requested));
}
