// `node --import ./test/support/module-trace.mjs ...`: records every module the process loads, one per line,
// in the file MODULE_TRACE_FILE names: ES modules through a resolve hook (module.register; the hooks run on
// their own thread, where this file is loaded again), CommonJS ones through Module._load. Plain JavaScript, so
// it loads without any TypeScript tooling. Used to show that the compiled server loads no TypeScript compiler.
import { appendFileSync } from "node:fs";
import process from "node:process";
import { createRequire, register } from "node:module";
import { isMainThread } from "node:worker_threads";

let file = process.env.MODULE_TRACE_FILE;

/** Hook thread: the file is handed over by register(). */
export function initialize(data) {
  file = data.file;
}

export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  appendFileSync(file, `esm ${result.url}\n`);
  return result;
}

if (isMainThread && file) {
  register(import.meta.url, { data: { file } });
  const Module = createRequire(import.meta.url)("node:module");
  const load = Module._load;
  Module._load = function (request, parent, isMain) {
    const loaded = load.call(this, request, parent, isMain);
    let resolved = request;
    try {
      resolved = Module._resolveFilename(request, parent, isMain);
    } catch {
      // a builtin or a virtual module: the request names it
    }
    appendFileSync(file, `cjs ${resolved}\n`);
    return loaded;
  };
}
