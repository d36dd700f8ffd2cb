const MIN_TIMESTAMP_MS = Date.parse("0001-01-01T00:00:00Z");
function old(seconds: bigint, nanos: number) {
  const ms = Number(seconds) * 1000;
  let z = "Z";
  if (nanos > 0) { const text = (nanos + 1_000_000_000).toString().substring(1); if (text.substring(3) === "000000") z = "." + text.substring(0, 3) + "Z"; else if (text.substring(6) === "000") z = "." + text.substring(0, 6) + "Z"; else z = "." + text + "Z"; }
  return new Date(ms).toISOString().replace(".000Z", z);
}
const p2 = (n: number) => (n < 10 ? "0" + n : "" + n);
function fast(seconds: bigint, nanos: number) {
  const secs = Number(seconds);
  const days = Math.floor(secs / 86400); let sod = secs - days * 86400;
  const h = Math.floor(sod / 3600); sod -= h * 3600; const mi = Math.floor(sod / 60); const s = sod - mi * 60;
  const zz = days + 719468; const era = Math.floor(zz / 146097); const doe = zz - era * 146097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36524) - Math.floor(doe / 146096)) / 365);
  let y = yoe + era * 400; const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100)); const mp = Math.floor((5 * doy + 2) / 153);
  const d = doy - Math.floor((153 * mp + 2) / 5) + 1; const m = mp < 10 ? mp + 3 : mp - 9; if (m <= 2) y += 1;
  let z = "Z";
  if (nanos > 0) { const text = (nanos + 1_000_000_000).toString().substring(1); if (text.endsWith("000000")) z = "." + text.substring(0, 3) + "Z"; else if (text.endsWith("000")) z = "." + text.substring(0, 6) + "Z"; else z = "." + text + "Z"; }
  return (y < 1000 ? ("000" + y).slice(-4) : "" + y) + "-" + p2(m) + "-" + p2(d) + "T" + p2(h) + ":" + p2(mi) + ":" + p2(s) + z;
}
let bad = 0;
for (let i = 0; i < 200000; i++) { const sec = BigInt(Math.floor(MIN_TIMESTAMP_MS / 1000 + Math.random() * (253402300799 - MIN_TIMESTAMP_MS / 1000))); const n = [0, 123000000, 123456000, 123456789, 1][i % 5]!; if (old(sec, n) !== fast(sec, n)) { bad++; if (bad < 5) console.log(sec, n, old(sec, n), fast(sec, n)); } }
console.log("mismatches", bad);
for (const [name, fn] of [["old", old], ["fast", fast]] as const) { const t = process.hrtime.bigint(); let x = 0; for (let i = 0; i < 1e6; i++) x += fn(1700000000n + BigInt(i & 1023), 123000000).length; console.log(name, Number(process.hrtime.bigint() - t) / 1e6, "ns/op", x > 0); }
