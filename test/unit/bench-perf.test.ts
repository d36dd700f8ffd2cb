// bench/perf.ts reads `perf report --sort dso,sym` text: each line's share goes to what ran.
import { describe, expect, it } from "vitest";
import { categoryShares } from "../../bench/perf.js";

describe("bench perf: categoryShares", () => {
  it("groups report lines by what ran, and skips headers and blank lines", () => {
    const report = [
      "# Samples: 8K of event 'cpu-clock:ppp'",
      "#",
      "     3.00%  [kernel.kallsyms]    [k] _raw_spin_unlock_irqrestore",
      "     2.84%  node                 [.] v8::internal::Scavenger::ScavengeObject<v8::internal::FullHeapObjectSlot>",
      "     2.50%  node                 [.] Builtins_LoadIC",
      "     1.00%  node                 [.] Builtins_CallFunction_ReceiverIsAny",
      "     2.44%  [JIT] tid 5666       [.] JS:*DataRow file:///x/node_modules/postgres/src/connection.js:492:19",
      "     0.05%  [JIT] tid 5666       [.] JS:^onwrite node:internal/streams/writable:615:17",
      "     1.05%  node                 [.] v8::String::WriteUtf8",
      "     1.03%  libc.so.6            [.] _int_malloc",
      "",
    ].join("\n");
    const shares = categoryShares(report);
    const pct = (c: string) => Math.round((shares.get(c) ?? 0) * 10_000) / 100;
    expect(pct("kernel")).toBe(3);
    expect(pct("garbage collector")).toBe(2.84);
    expect(pct("V8 builtins: inline caches")).toBe(2.5);
    expect(pct("V8 builtins")).toBe(1);
    expect(pct("optimized JavaScript")).toBe(2.44);
    expect(pct("other JavaScript (interpreted, baseline)")).toBe(0.05);
    expect(pct("V8 runtime (strings, lookups, allocation, dates)")).toBe(1.05);
    expect(pct("libc, node's C++, nghttp2, other")).toBe(1.03);
    expect([...shares.keys()]).toHaveLength(8);
  });
});
