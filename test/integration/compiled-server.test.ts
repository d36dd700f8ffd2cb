// The compiled server (`npm run build`, then `node dist/server.js`): built once here into a scratch
// directory, it applies its migrations and answers on every protocol, its commands run compiled too
// (dist/cli/*.js), and neither loads any TypeScript tooling (tsx, typescript, esbuild) nor any .ts file, nor
// anything of the sources: every module the processes load is recorded by a loader hook
// (test/support/module-trace.mjs) and checked.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PingService } from "../../gen/chainguard/platform/ping/v2/ping_pb.js";
import { build } from "../../scripts/build.js";
import { call, protocols } from "../contract/harness.js";
import { createScratchDatabase, type ScratchDatabase } from "../support/server-process.js";

const root = new URL("../..", import.meta.url).pathname;
const trace = join(root, "test/support/module-trace.mjs");
const work = mkdtempSync(join(tmpdir(), "compiled-"));
const outDir = join(work, "dist");
const traceFile = join(work, "modules.txt");
let scratch: ScratchDatabase | undefined;
let env: NodeJS.ProcessEnv;
let server: ChildProcess | undefined;
let serverLog = "";
let baseUrl = "";

/** Runs a compiled file with plain node (no NODE_OPTIONS: nothing preloaded but the trace), outside the checkout. */
function node(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ["--import", trace, ...args], { env, cwd: work, timeout: 120_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? -1) : 0, stdout, stderr }),
    );
  });
}

beforeAll(async () => {
  build(outDir);
  if (process.env.DATABASE_URL) scratch = await createScratchDatabase();
  env = {
    ...process.env,
    NODE_OPTIONS: "",
    MODULE_TRACE_FILE: traceFile,
    DATABASE_URL: scratch?.url ?? "",
    DATA_DIR: join(work, "data"),
    SERVER_MODE: "production",
    ISSUER_URL: "https://apiserver.test",
    PORT: "0",
    HOST: "127.0.0.1",
    LOG_LEVEL: "info",
  };
}, 300_000);

afterAll(async () => {
  if (server && server.exitCode === null) server.kill("SIGKILL");
  await scratch?.dispose();
  rmSync(work, { recursive: true, force: true });
});

describe("the compiled server", () => {
  it("builds JavaScript only, with the migrations beside it", () => {
    const files = readdirSync(outDir, { recursive: true }).map(String).filter((f) => !f.startsWith("node_modules"));
    expect(files).toEqual(expect.arrayContaining(["server.js", join("cli", "bootstrap.js"), join("cli", "keys.js"), join("cli", "import-oci.js"), join("cli", "import-libraries.js"), "package.json"]));
    expect(files.filter((f) => f.endsWith(".ts"))).toEqual([]);
    expect(readdirSync(join(outDir, "drizzle")).filter((f) => f.endsWith(".sql")).sort()).toEqual(readdirSync(join(root, "drizzle")).filter((f) => f.endsWith(".sql")).sort());
  });

  it("runs a command compiled: bootstrap creates the database (migrations from dist) and an organization", async () => {
    const r = await node([join(outDir, "cli/bootstrap.js"), "--issuer", "https://idp.example.com", "--subject", "compiled"]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ group: expect.stringMatching(/^[0-9a-f]{40}$/), created: true });
  });

  it("answers --help on every compiled command, naming it as it was run (node dist/cli/<file>, not npm run)", async () => {
    const commands = readdirSync(join(outDir, "cli")).filter((f) => f.endsWith(".js"));
    expect(commands.sort()).toEqual(["bootstrap.js", "import-advisories.js", "import-libraries.js", "import-oci.js", "import-osv.js", "keys.js", "registry-gc.js"]);
    for (const file of commands) {
      const usage = `usage: node ${join("dist/cli", file)}${file === "keys.js" ? " rotate" : ""}`;
      const r = await node([join(outDir, "cli", file), "--help"]);
      expect(r.code, `${file}: ${r.stderr}`).toBe(0);
      expect(r.stdout, file).toMatch(new RegExp(`^${usage}\\b`));
      expect(r.stdout, file).not.toMatch(/npm run/);
      const bad = await node([join(outDir, "cli", file), "--no-such-option"]);
      expect(bad.code, file).toBe(2);
      expect(bad.stderr.split("\n")[1], file).toMatch(new RegExp(`^${usage}\\b`));
    }
  });

  it("starts, and answers Ping on every protocol and /healthz", async () => {
    const child = spawn(process.execPath, ["--import", trace, join(outDir, "server.js")], { env, cwd: work, stdio: ["ignore", "ignore", "pipe"] });
    server = child;
    const port = await new Promise<number>((resolve, reject) => {
      child.stderr!.on("data", (b: Buffer) => {
        serverLog += b.toString();
        // The log is JSON lines (pino: the message last); the API's own "listening" line names its port.
        for (const line of serverLog.split("\n")) {
          const entry = (() => {
            try {
              return JSON.parse(line) as { msg?: string; port?: number };
            } catch {
              return undefined;
            }
          })();
          if (entry?.msg === "listening" && typeof entry.port === "number") resolve(entry.port);
        }
      });
      child.once("exit", (code) => reject(new Error(`server exited (${code}) before listening:\n${serverLog}`)));
    });
    baseUrl = `http://127.0.0.1:${port}`;
    expect((await fetch(`${baseUrl}/healthz`)).status).toBe(200);
    for (const protocol of protocols) {
      const out = await call(protocol, baseUrl, PingService.method.ping, {});
      expect(out.error, protocol).toBeUndefined();
      expect(out.message?.response, protocol).toBe("pong");
    }
  });

  it("stops gracefully on SIGTERM", async () => {
    const child = server!;
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    child.kill("SIGTERM");
    expect(await exited, serverLog).toBe(0);
  });

  it("loaded no TypeScript tooling and no TypeScript file, in the server or the commands", () => {
    const loaded = readFileSync(traceFile, "utf8").trim().split("\n").map((l) => l.slice(l.indexOf(" ") + 1));
    // The trace works: it saw the bundles, and node's own modules they import.
    expect(loaded).toEqual(expect.arrayContaining([`file://${join(outDir, "server.js")}`, `file://${join(outDir, "cli/bootstrap.js")}`, "node:http2"]));
    expect(loaded.filter((m) => /\/node_modules\/(tsx|typescript|esbuild|@esbuild|ts-node|@swc)\//.test(m))).toEqual([]);
    expect(loaded.filter((m) => /\.[cm]?tsx?$/.test(m))).toEqual([]);
    // Nothing of the project is loaded from the checkout's sources, nor the unbundled build: the bundles hold it.
    expect(loaded.filter((m) => m.startsWith(`file://${root}src/`) || m.startsWith(`file://${root}gen/`))).toEqual([]);
    expect(loaded.filter((m) => m.startsWith(`file://${outDir}/src/`) || m.startsWith(`file://${outDir}/gen/`))).toEqual([]);
  });
});
