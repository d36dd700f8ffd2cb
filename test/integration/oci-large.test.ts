// Opt-in (OCI_LARGE=1; not run by CI): a 1 GiB blob pushed to the server over HTTP and pulled back, on each
// storage backend, the server's memory staying flat. The push is one streamed PATCH then an empty PUT with
// the digest, as clients push a large layer; the pull one GET. The client streams too (the data generated and
// hashed 1 MiB at a time, the pulled bytes hashed as they come) and runs in this process with the server, so
// the heap and buffers measured here are the server's, the client's and, on S3, the test S3 server's, sampled
// every 100 ms with their garbage not yet collected (an upper bound), with the peak resident set.
//
//   OCI_LARGE=1 npx vitest run test/integration/oci-large.test.ts --maxWorkers=1
//   OCI_LARGE=1 OCI_LARGE_MIB=4096 OCI_LARGE_BACKENDS=filesystem ...      (another size, one backend)
//
// Figures are printed (docs/registry-storage.md records them); the assertion is only that memory stays far
// below the blob's size.
import { createHash, randomBytes } from "node:crypto";
import { request } from "node:http";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { afterAll, describe, expect, it } from "vitest";
import { blobStoreSubjects, stopS3Subject } from "../support/blob-stores.js";
import { startTestServer } from "../support/server.js";
import { seedWorld } from "../support/world.js";

const MiB = 1024 * 1024;
const size = Number(process.env.OCI_LARGE_MIB ?? 1024) * MiB;
const wanted = (process.env.OCI_LARGE_BACKENDS ?? "filesystem,s3").split(",");

afterAll(async () => {
  await stopS3Subject();
});

/**
 * Memory now: the live heap and buffers (garbage not yet collected included: an upper bound, no forced
 * collection, which would slow the transfer down) and the resident set.
 */
function measure() {
  const m = process.memoryUsage();
  return { live: m.heapUsed + m.arrayBuffers, rss: m.rss };
}

/** One request whose body streams from `body`; the response streamed into `sink` (or collected). */
function send(url: string, method: string, headers: Record<string, string>, body?: Readable, sink?: (res: Readable) => Promise<void>) {
  return new Promise<{ status: number; headers: Record<string, string | string[] | undefined>; text: string }>((resolve, reject) => {
    const req = request(url, { method, headers }, (res) => {
      const done = (text: string) => resolve({ status: res.statusCode ?? 0, headers: res.headers, text });
      if (sink && res.statusCode === 200) {
        sink(res).then(() => done(""), reject);
        return;
      }
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => done(Buffer.concat(chunks).toString("utf8")));
      res.on("error", reject);
    });
    req.on("error", reject);
    if (body) body.pipe(req);
    else req.end();
  });
}

describe.runIf(process.env.OCI_LARGE === "1").each(blobStoreSubjects.filter((s) => wanted.includes(s.name)))("a large blob through /v2/ on the $name blob store", (subject) => {
  it(`pushes and pulls ${size / MiB} MiB with the memory flat`, { timeout: 3_600_000 }, async () => {
    const opened = await subject.open();
    const server = await startTestServer({ blobs: opened.store });
    try {
      const world = await seedWorld(server);
      const auth = { authorization: `Bearer ${world.token.owner}` };
      const name = `${world.org}/large`;
      const baseline = measure();
      let peak = { live: 0, rss: 0 };
      const sample = () => {
        const m = measure();
        peak = { live: Math.max(peak.live, m.live - baseline.live), rss: Math.max(peak.rss, m.rss) };
      };
      const sampler = setInterval(sample, 100);
      const report: string[] = [];
      try {
        // Push: POST, one PATCH streaming the whole blob, PUT with the digest.
        const block = randomBytes(MiB);
        const hash = createHash("sha256");
        const generated = Readable.from(
          (function* () {
            for (let i = 0; i < size / MiB; i++) {
              // Every MiB different (the block with its index in front), never more than one held.
              const b = Buffer.from(block);
              b.writeUInt32BE(i, 0);
              hash.update(b);
              yield b;
            }
          })(),
        );
        let t = performance.now();
        const started = await send(`${server.baseUrl}/v2/${name}/blobs/uploads/`, "POST", auth);
        expect(started.status).toBe(202);
        const location = String(started.headers.location);
        const patched = await send(`${server.baseUrl}${location}`, "PATCH", { ...auth, "content-type": "application/octet-stream" }, generated);
        expect(patched.status, patched.text).toBe(202);
        expect(patched.headers.range).toBe(`0-${size - 1}`);
        const digest = `sha256:${hash.digest("hex")}`;
        const put = await send(`${server.baseUrl}${location}?digest=${digest}`, "PUT", { ...auth, "content-length": "0" });
        expect(put.status, put.text).toBe(201);
        sample();
        report.push(`push ${((size / MiB / (performance.now() - t)) * 1000).toFixed(0)} MiB/s, peak heap + buffers above the baseline ${(peak.live / MiB).toFixed(1)} MiB, peak RSS ${(peak.rss / MiB).toFixed(0)} MiB`);
        const afterPush = peak;
        peak = { live: 0, rss: 0 };

        // Pull: one GET, hashed as it streams.
        t = performance.now();
        const pulledHash = createHash("sha256");
        let pulled = 0;
        const got = await send(`${server.baseUrl}/v2/${name}/blobs/${digest}`, "GET", auth, undefined, (res) =>
          pipeline(res, async function* (chunks: AsyncIterable<Buffer>) {
            for await (const c of chunks) {
              pulled += c.length;
              pulledHash.update(c);
            }
            yield* [];
          }),
        );
        expect(got.status).toBe(200);
        expect(pulled).toBe(size);
        expect(`sha256:${pulledHash.digest("hex")}`).toBe(digest);
        sample();
        report.push(`pull ${((size / MiB / (performance.now() - t)) * 1000).toFixed(0)} MiB/s, peak heap + buffers above the baseline ${(peak.live / MiB).toFixed(1)} MiB, peak RSS ${(peak.rss / MiB).toFixed(0)} MiB`);
        console.log(`${subject.name}, ${size / MiB} MiB (RSS before ${(baseline.rss / MiB).toFixed(0)} MiB):\n  ${report.join("\n  ")}`);
        // Flat: a small fraction of the blob, whatever its size (a blob held whole would be all of it). On S3 the
        // test S3 server in this process adds its own buffers (about 85 MiB at the push's peak, uncollected
        // garbage included).
        for (const p of [afterPush, peak]) expect(p.live).toBeLessThan(128 * MiB);
      } finally {
        clearInterval(sampler);
      }
    } finally {
      await server.close();
      await opened.dispose();
    }
  });
});
