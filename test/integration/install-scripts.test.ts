// What `npm install` runs besides unpacking: every dependency with an install script is one reviewed here, and
// none reports anything to a third party. swagger-ui-dist depends on @scarf/scarf, whose postinstall sends
// the installing project's name, versions and dependency chain to scarf.sh unless the root package.json opts
// out (`scarfSettings.enabled: false`): it is run here as npm runs it, pointed at a local server (its own
// SCARF_LOCAL_PORT), which must receive nothing.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const root = new URL("../..", import.meta.url).pathname;

/**
 * The packages whose install scripts npm runs, what each does (read in its own files), and whether
 * package.json's `allowScripts` lets it run (npm 11 runs a dependency's install script only when that field
 * approves it, and lists every one it skipped at the end of each install). A dependency that adds one fails
 * this test until it is read, listed here, and approved or denied there.
 */
const reviewed: Record<string, { does: string; allowed: boolean }> = {
  "@bufbuild/buf": { does: "checks that the binary of its platform package is there (no network)", allowed: true },
  esbuild: { does: "checks its platform binary; only when that optional package is missing, fetches it from the npm registry", allowed: true },
  protobufjs: { does: "warns about a version scheme mismatch of packages depending on it (no network)", allowed: true },
  "@scarf/scarf": { does: "reports the install to scarf.sh: denied, and turned off by scarfSettings for the npm versions that run it anyway (tested below)", allowed: false },
};

function withInstallScripts(): string[] {
  const lock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8")) as { packages: Record<string, { hasInstallScript?: boolean }> };
  return Object.entries(lock.packages)
    .filter(([, p]) => p.hasInstallScript)
    .map(([path]) => path.slice(path.lastIndexOf("node_modules/") + "node_modules/".length));
}

describe("install scripts", () => {
  it("are only those reviewed", () => {
    const withScripts = withInstallScripts();
    expect(withScripts.length).toBeGreaterThan(0);
    for (const name of withScripts) expect(reviewed, `${name} runs an install script: read it, and list it here`).toHaveProperty([name]);
  });

  it("are each approved or denied by name in package.json's allowScripts, as reviewed", () => {
    const { allowScripts } = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { allowScripts?: Record<string, unknown> };
    const expected = Object.fromEntries([...new Set(withInstallScripts())].map((name) => [name, reviewed[name]?.allowed]));
    expect(allowScripts ?? {}, "approve with `npm install-scripts approve --no-allow-scripts-pin <pkg>`, deny with `npm install-scripts deny <pkg>`").toEqual(expected);
  });

  it("@scarf/scarf's postinstall, run as npm runs it for this package, sends nothing", async () => {
    const received: string[] = [];
    const sink = createServer((req, res) => {
      received.push(`${req.method} ${req.url}`);
      res.end();
    });
    await new Promise<void>((resolve) => sink.listen(0, "127.0.0.1", resolve));
    try {
      const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, INIT_CWD: root, SCARF_LOCAL_PORT: String((sink.address() as AddressInfo).port), SCARF_VERBOSE: "true" };
      const { stdout, stderr } = await promisify(execFile)(process.execPath, [join(root, "node_modules/@scarf/scarf/report.js")], { cwd: join(root, "node_modules/@scarf/scarf"), env, timeout: 60_000 });
      expect(received, stdout + stderr).toEqual([]);
      expect(stderr).toMatch(/User has opted out/);
    } finally {
      sink.close();
    }
  });
});
