// The import graph of src/, and what it must not hold: an arrow from a lower layer to a higher one (other
// than to the configuration and logging), an arrow between the server and a domain, and a circle of files.
// Type-only imports count: they tie files as much as the others.
//
//   npx tsx scripts/import-graph.ts        prints what it finds; exits 1 when anything is wrong
//
// test/unit/import-graph.test.ts runs the same check, so it stays true.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

/** One arrow: `from` imports `to` (paths relative to src/, with / separators). */
export interface Edge {
  from: string;
  to: string;
}

/** The domains: one folder each, side by side. One may import another; none imports the server, nor the other way. */
const DOMAINS = new Set(["iam", "registry", "events", "libraries", "advisory", "vulnerabilities", "ping", "sts"]);

/** What any file may import: the configuration and logging. */
const BASE = new Set(["config.ts", "kernel/log.ts"]);

/**
 * The layer of a file, lowest first: the kernel and the database (what every domain shares), the REST
 * gateway, then the server and the domains side by side, the composition root, and the entry points.
 */
export function layerOf(file: string): { rank: number; part: string } {
  const top = file.split("/")[0]!;
  if (top === "kernel" || top === "db") return { rank: 1, part: "kernel" };
  if (top === "gateway") return { rank: 2, part: "gateway" };
  if (top === "server") return { rank: 3, part: "server" };
  if (DOMAINS.has(top)) return { rank: 3, part: top };
  if (file === "compose.ts" || file === "modules.ts") return { rank: 4, part: "root" };
  if (file === "main.ts" || top === "cli") return { rank: 5, part: "entry" };
  return { rank: 0, part: file };
}

/** The arrows that break the layering. */
export function layerViolations(edges: readonly Edge[]): Edge[] {
  return edges.filter(({ from, to }) => {
    if (BASE.has(to)) return false;
    const a = layerOf(from);
    const b = layerOf(to);
    if (a.rank === 0 || b.rank === 0) return a.part !== b.part;
    if (b.rank > a.rank) return true;
    // Side by side: within one part, or from one domain to another.
    return b.rank === a.rank && a.part !== b.part && !(DOMAINS.has(a.part) && DOMAINS.has(b.part));
  });
}

/** The circles: each a set of files that reach one another (Tarjan's strongly connected components). */
export function cycles(edges: readonly Edge[]): string[][] {
  const next = new Map<string, string[]>();
  for (const { from, to } of edges) {
    next.set(from, [...(next.get(from) ?? []), to]);
    if (!next.has(to)) next.set(to, []);
  }
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let counter = 0;
  const visit = (v: string) => {
    index.set(v, counter);
    low.set(v, counter);
    counter++;
    stack.push(v);
    onStack.add(v);
    for (const w of next.get(v)!) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || next.get(v)!.includes(v)) found.push(component.sort());
    }
  };
  for (const v of next.keys()) if (!index.has(v)) visit(v);
  return found;
}

/** The imports between the .ts files under `srcDir` (relative specifiers only: packages and gen/ are outside). */
export function importGraph(srcDir: string): Edge[] {
  const root = resolve(srcDir);
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (p.endsWith(".ts")) files.push(p);
    }
  };
  walk(root);
  const edges: Edge[] = [];
  for (const file of files) {
    const { importedFiles } = ts.preProcessFile(readFileSync(file, "utf8"), true, true);
    for (const { fileName } of importedFiles) {
      if (!fileName.startsWith(".")) continue;
      const target = resolve(dirname(file), fileName).replace(/\.js$/, ".ts");
      if (!target.startsWith(root + "/")) continue;
      edges.push({ from: relative(root, file).split("\\").join("/"), to: relative(root, target).split("\\").join("/") });
    }
  }
  return edges;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const src = resolve(dirname(fileURLToPath(import.meta.url)), "../src");
  const edges = importGraph(src);
  const wrong = layerViolations(edges);
  const circles = cycles(edges);
  console.log(`${edges.length} imports between ${new Set(edges.flatMap((e) => [e.from, e.to])).size} files of src/`);
  for (const e of wrong) console.log(`against the layers: ${e.from} -> ${e.to}`);
  for (const c of circles) console.log(`circle: ${c.join(", ")}`);
  console.log(`${wrong.length} against the layers, ${circles.length} circles`);
  process.exit(wrong.length + circles.length === 0 ? 0 : 1);
}
