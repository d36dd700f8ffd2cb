// The content of manifests recently pushed or pulled, by digest, so that a manifest pull (one of the three
// requests of a small image's pull) answers from memory instead of a stat, an open and a read of its blob.
// Content under a digest never changes, so an entry is never stale: it can only be evicted. An entry exists
// only for content that was stored (pushed, or read from the store), so a hit says the content is stored as
// the store's stat would; whether the repo has the manifest is still its row's question, asked first.
// Bounded in bytes (least recently used out first): memory stays flat whatever the registry holds.

/** The most bytes of manifest content kept. */
const DEFAULT_MAX_BYTES = 8 * 1024 * 1024;
/** Larger manifests are not kept (an index of thousands of platforms would push out hundreds of small ones). */
const MAX_ENTRY_BYTES = 256 * 1024;

export class ManifestContentCache {
  readonly #entries = new Map<string, Buffer>();
  #bytes = 0;

  constructor(readonly maxBytes = DEFAULT_MAX_BYTES) {}

  get(digest: string): Buffer | undefined {
    const hit = this.#entries.get(digest);
    if (hit) {
      // Most recently used last.
      this.#entries.delete(digest);
      this.#entries.set(digest, hit);
    }
    return hit;
  }

  set(digest: string, content: Buffer): void {
    if (content.length > MAX_ENTRY_BYTES || content.length > this.maxBytes || this.#entries.has(digest)) return;
    this.#entries.set(digest, content);
    this.#bytes += content.length;
    for (const [oldest, bytes] of this.#entries) {
      if (this.#bytes <= this.maxBytes) break;
      this.#entries.delete(oldest);
      this.#bytes -= bytes.length;
    }
  }

  get size(): number {
    return this.#entries.size;
  }

  get bytes(): number {
    return this.#bytes;
  }
}
