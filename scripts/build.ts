// npm run build [-- --out-dir <dir>]
//
// Compiles the server, its commands and the generated code to JavaScript (tsc, tsconfig.build.json: dist/src,
// dist/gen), then bundles each entry point into one file with esbuild: dist/server.js and dist/cli/<name>.js.
// Production runs `node dist/server.js`, with no TypeScript compiler loaded. Why bundles: loading the ~500
// modules of the unbundled build (each resolved, read and compiled on its own) was half of a start's CPU time
// (bench/README.md, Cold start); one file halves it. The unbundled build stays runnable (node dist/src/main.js).
// Besides code, the output holds what is found by path at run time: drizzle/ (the migrations, found by
// db/client.ts as the nearest drizzle/ above it) and a package.json marking the files as ES modules. Packages
// left out of the bundles (those that load files of their own by path) resolve from the node_modules of the
// checkout; an output directory outside it (tests, benchmarks) gets a node_modules link to it.
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, isAbsolute, join, relative, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

export const repoRoot = fileURLToPath(new URL("..", import.meta.url));

/** Builds into `outDir` (default dist/ of the checkout), replacing whatever it held. Resolves with its path. */
export function build(outDir = join(repoRoot, "dist")): string {
  const out = resolve(outDir);
  // The output is emptied first: never the checkout, nor a directory that holds it.
  const up = relative(out, resolve(repoRoot));
  if (up === "" || (!up.startsWith("..") && !isAbsolute(up))) throw new Error("the output directory cannot be the checkout itself or a directory holding it");
  // A clean output: a file removed from src/ must not linger in dist/.
  rmSync(out, { recursive: true, force: true });
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  execFileSync(process.execPath, [tsc, "-p", join(repoRoot, "tsconfig.build.json"), "--outDir", out], { stdio: "inherit" });
  cpSync(join(repoRoot, "drizzle"), join(out, "drizzle"), { recursive: true });
  writeFileSync(join(out, "package.json"), JSON.stringify({ private: true, type: "module" }, null, 2) + "\n");
  const inside = relative(repoRoot, out);
  if (inside.startsWith("..") || isAbsolute(inside)) {
    const modules = join(out, "node_modules");
    mkdirSync(dirname(modules), { recursive: true });
    if (!existsSync(modules)) symlinkSync(join(repoRoot, "node_modules"), modules, "dir");
  }
  bundle(out);
  return out;
}

/** The entry points bundled: the server, and each command of src/cli (its files that run themselves). */
function entryPoints(out: string): Record<string, string> {
  const commands = readdirSync(join(out, "src/cli")).filter((f) => f.endsWith(".js") && /^runWhenMain\(import\.meta\.url/m.test(readFileSync(join(out, "src/cli", f), "utf8")));
  return Object.fromEntries([["server", join(out, "src/main.js")], ...commands.map((f) => [`cli/${f.slice(0, -3)}`, join(out, "src/cli", f)])]);
}

/**
 * Packages kept out of the bundles: they find files of their own by path at run time (PGlite its WebAssembly
 * and data files; pino its worker transports; swagger-ui-dist its assets), so they load from node_modules.
 */
const EXTERNAL = ["@electric-sql/pglite", "pino", "pino-*", "thread-stream", "swagger-ui-dist"];

function bundle(out: string): void {
  // esbuild comes with the development dependencies (drizzle-kit's), as typescript does.
  const esbuild = createRequire(import.meta.url).resolve("esbuild/bin/esbuild");
  execFileSync(
    esbuild,
    [
      ...Object.entries(entryPoints(out)).map(([name, file]) => `${name}=${file}`),
      "--bundle",
      "--platform=node",
      "--format=esm",
      "--target=node20",
      "--sourcemap",
      `--outdir=${out}`,
      "--log-level=warning",
      ...EXTERNAL.map((e) => `--external:${e}`),
      // CommonJS packages inside an ES module bundle call require() for node's own modules: give them one.
      "--banner:js=import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);",
    ],
    { stdio: "inherit" },
  );
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const usage = "usage: npm run build [-- --out-dir <dir>]";
  let outDir: string | undefined;
  try {
    const { values } = parseArgs({ options: { "out-dir": { type: "string" }, help: { type: "boolean", short: "h" } } });
    if (values.help) {
      process.stdout.write(`${usage}\n\nCompiles src/ and gen/ to JavaScript under dist/ (or --out-dir), with the migrations.\n`);
      process.exit(0);
    }
    outDir = values["out-dir"];
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${usage}\n`);
    process.exit(2);
  }
  try {
    const out = build(outDir);
    process.stderr.write(`built ${relative(process.cwd(), out) || "."}: node ${relative(process.cwd(), join(out, "server.js"))}\n`);
  } catch (err) {
    process.stderr.write(`build failed: ${(err as Error).message}\n`);
    process.exit(1);
  }
}
