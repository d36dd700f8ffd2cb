// How the S3 store composes a blob from the chunks of an upload (planParts): every byte once, in order, in
// parts S3 accepts (all but the last at least 5 MiB, none above 5 GiB, at most 10,000), copied server-side
// wherever a chunk is large enough to stand as a part.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MAX_PART_BYTES, MIN_PART_BYTES, planParts, type ChunkRange, type StagedChunk } from "../../src/registry/oci/s3-store.js";

const MiB = 1024 * 1024;

function chunksOf(sizes: readonly number[]): StagedChunk[] {
  let offset = 0;
  return sizes.map((size, i) => {
    const c = { key: `c${i}`, offset, size };
    offset += size;
    return c;
  });
}

/** The ranges of the plan in order, and the plan's checks against S3's rules. */
function check(sizes: readonly number[]) {
  const chunks = chunksOf(sizes);
  const parts = planParts(chunks);
  const ranges: ChunkRange[] = [];
  parts.forEach((p, i) => {
    const size = "copy" in p ? p.copy.end - p.copy.start + 1 : p.size;
    if ("stream" in p) expect(p.stream.reduce((n, r) => n + r.end - r.start + 1, 0)).toBe(p.size);
    if (i < parts.length - 1) expect(size).toBeGreaterThanOrEqual(MIN_PART_BYTES);
    expect(size).toBeLessThanOrEqual(MAX_PART_BYTES);
    expect(size).toBeGreaterThan(0);
    ranges.push(...("copy" in p ? [p.copy] : p.stream));
  });
  expect(parts.length).toBeLessThanOrEqual(10_000);
  // Every byte of every chunk once, in order.
  const covered: Array<[string, number, number]> = [];
  for (const r of ranges) {
    const last = covered.at(-1);
    if (last && last[0] === r.key && last[2] + 1 === r.start) last[2] = r.end;
    else covered.push([r.key, r.start, r.end]);
  }
  expect(covered).toEqual(chunks.filter((c) => c.size > 0).map((c) => [c.key, 0, c.size - 1]));
  return parts;
}

describe("planParts", () => {
  it("copies large chunks server-side and joins small ones into streamed parts", () => {
    const parts = check([1, 20, 3, 3, 37].map((n) => n * MiB));
    expect(parts.map((p) => ("copy" in p ? `copy ${p.copy.key}` : `stream ${p.stream.map((r) => r.key).join("+")}`))).toEqual([
      "stream c0+c1",
      "copy c1",
      "stream c2+c3",
      "stream c3+c4",
      "copy c4",
    ]);
  });

  it("one chunk larger than a part is copied in even pieces", () => {
    const parts = check([12 * 1024 * MiB]);
    expect(parts).toHaveLength(3);
    expect(parts.every((p) => "copy" in p)).toBe(true);
  });

  it("many tiny chunks stay within 10,000 parts", () => {
    check(Array.from({ length: 30_000 }, () => 4 * MiB));
  });

  it("holds for any chunk sizes", () => {
    const size = fc.oneof(fc.integer({ min: 0, max: 2 * MIN_PART_BYTES }), fc.integer({ min: 0, max: 3 * MAX_PART_BYTES }), fc.constantFrom(MIN_PART_BYTES - 1, MIN_PART_BYTES, MAX_PART_BYTES, MAX_PART_BYTES + 1));
    fc.assert(
      fc.property(fc.array(size, { maxLength: 40 }), (sizes) => {
        check(sizes);
      }),
    );
  });
});
