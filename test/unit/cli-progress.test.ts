// Progress of long commands: one line rewritten in place on a terminal, plain lines (throttled) otherwise.
import { describe, expect, it } from "vitest";
import { countOf, createProgress } from "../../src/cli/progress.js";

function fakeStream(isTTY: boolean) {
  const writes: string[] = [];
  const stream = { isTTY, columns: 20, write: (s: string) => writes.push(s) > 0 } as unknown as NodeJS.WriteStream;
  return { stream, writes };
}

describe("createProgress", () => {
  it("on a terminal, rewrites one line in place, cut to the width, and ends it before other lines", () => {
    const { stream, writes } = fakeStream(true);
    const p = createProgress(stream);
    p.update(() => "writing: 1/3 artifacts and a long tail", true);
    p.update(() => "writing: 3/3", true);
    p.line("skipped x: broken");
    p.end();
    expect(writes).toEqual(["\r\x1b[2Kwriting: 1/3 artifa", "\r\x1b[2Kwriting: 3/3", "\n", "skipped x: broken\n"]);
  });

  it("elsewhere, writes plain lines, at most one per interval unless asked to now", () => {
    const { stream, writes } = fakeStream(false);
    const p = createProgress(stream, { plainIntervalMs: 60_000 });
    p.update(() => "scanning");
    p.update(() => "scanning again"); // within the interval: dropped
    p.update(() => "done", true);
    p.end();
    expect(writes).toEqual(["scanning\n", "done\n"]);
  });

  it("counts in the singular for one and the plural otherwise", () => {
    expect([countOf(0, "file"), countOf(1, "file"), countOf(2, "file")]).toEqual(["0 files", "1 file", "2 files"]);
  });
});
