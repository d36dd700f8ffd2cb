import { describe, expect, it } from "vitest";
import { ManifestContentCache } from "../../src/registry/oci/manifest-cache.js";

const bytes = (n: number, fill = 1) => Buffer.alloc(n, fill);

describe("ManifestContentCache", () => {
  it("answers what it was given, by digest", () => {
    const cache = new ManifestContentCache(1000);
    cache.set("sha256:a", bytes(10, 7));
    expect(cache.get("sha256:a")).toEqual(bytes(10, 7));
    expect(cache.get("sha256:b")).toBeUndefined();
  });

  it("keeps at most its bytes, the least recently used out first", () => {
    const cache = new ManifestContentCache(300);
    cache.set("sha256:a", bytes(100));
    cache.set("sha256:b", bytes(100));
    cache.set("sha256:c", bytes(100));
    cache.get("sha256:a"); // used: b is now the oldest
    cache.set("sha256:d", bytes(100));
    expect(cache.get("sha256:b")).toBeUndefined();
    expect([cache.get("sha256:a"), cache.get("sha256:c"), cache.get("sha256:d")].every((b) => b !== undefined)).toBe(true);
    expect(cache.bytes).toBe(300);
    expect(cache.size).toBe(3);
  });

  it("does not keep content larger than a manifest it is meant for, nor larger than itself", () => {
    const cache = new ManifestContentCache(100);
    cache.set("sha256:big", bytes(101));
    expect(cache.get("sha256:big")).toBeUndefined();
    const roomy = new ManifestContentCache(10 * 1024 * 1024);
    roomy.set("sha256:huge", bytes(257 * 1024));
    expect(roomy.get("sha256:huge")).toBeUndefined();
    expect(roomy.bytes).toBe(0);
  });

  it("counts a digest set twice once", () => {
    const cache = new ManifestContentCache(1000);
    cache.set("sha256:a", bytes(10));
    cache.set("sha256:a", bytes(10));
    expect(cache.bytes).toBe(10);
    expect(cache.size).toBe(1);
  });
});
