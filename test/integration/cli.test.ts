// Every command of package.json (the scripts running src/cli/*.ts) answers --help and -h with its usage and
// exit 0, and refuses bad arguments with exit 2, one line saying what is wrong and the usage line, before it
// opens any database. Commands are found from package.json, so a new one is held to this without a new test.
import { execFile } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const root = new URL("../..", import.meta.url).pathname;
const tsx = join(root, "node_modules", ".bin", "tsx");
const scripts = (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts;

/** The npm scripts that run a command of src/cli: name, file, and the words the script passes first. */
const commands = Object.entries(scripts).flatMap(([name, line]) => {
  const m = /^tsx (src\/cli\/[a-z0-9-]+\.ts)((?: [a-z0-9-]+)*)$/.exec(line);
  return m ? [{ name, file: m[1]!, leading: m[2]!.trim().split(" ").filter(Boolean) }] : [];
});

// No database may be opened by a refusal: an empty data directory that must stay empty, and no PostgreSQL.
const dataDir = mkdtempSync(join(tmpdir(), "cli-args-"));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

interface Exit {
  code: number;
  stdout: string;
  stderr: string;
}

function run(file: string, args: string[]): Promise<Exit> {
  return new Promise((resolve) => {
    execFile(tsx, [join(root, file), ...args], { env: { ...process.env, DATA_DIR: dataDir, DATABASE_URL: "", NODE_OPTIONS: "" }, timeout: 120_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? -1) : 0, stdout, stderr }),
    );
  });
}

/** Exit 2; stderr is the one-line reason, then the usage line; nothing on stdout. */
function expectRefused(r: Exit, name: string, reason: RegExp): void {
  expect(r.code, r.stderr).toBe(2);
  expect(r.stdout).toBe("");
  const lines = r.stderr.trimEnd().split("\n");
  expect(lines, r.stderr).toHaveLength(2);
  expect(lines[0]).toMatch(reason);
  expect(lines[1]).toMatch(new RegExp(`^usage: npm run ${name}\\b`));
}

describe("every command", () => {
  it("is found in package.json", () => {
    expect(commands.map((c) => c.name)).toEqual(expect.arrayContaining(["bootstrap", "keys:rotate", "import-oci", "import-libraries"]));
  });

  for (const c of commands) {
    it(`${c.name}: --help and -h print the usage and exit 0; an unknown option exits 2 with one line`, async () => {
      const [help, h, unknown] = await Promise.all([
        run(c.file, [...c.leading, "--help"]),
        run(c.file, [...c.leading, "-h"]),
        run(c.file, [...c.leading, "--no-such-option"]),
      ]);
      for (const r of [help, h]) {
        expect(r.code, r.stderr).toBe(0);
        expect(r.stderr).toBe("");
        expect(r.stdout).toMatch(new RegExp(`^usage: npm run ${c.name}\\b`));
        expect(r.stdout).toContain("-h, --help");
        expect(r.stdout).toMatch(/exit status: 0 /);
      }
      expect(h.stdout).toBe(help.stdout);
      expectRefused(unknown, c.name, /^unknown option '--no-such-option'$/);
    });
  }
});

describe("bad arguments", () => {
  const repo = `${"0".repeat(40)}/${"0".repeat(16)}`;
  const cases: Array<{ name: string; file: string; args: string[]; reason: RegExp }> = [
    { name: "bootstrap", file: "src/cli/bootstrap.ts", args: ["--subject", "s"], reason: /^--issuer is required$/ },
    { name: "bootstrap", file: "src/cli/bootstrap.ts", args: ["--issuer", "https://idp.example.com", "--subject", "s", "extra"], reason: /^unexpected argument 'extra'$/ },
    { name: "bootstrap", file: "src/cli/bootstrap.ts", args: ["--issuer", "nope", "--subject", "s"], reason: /^--issuer must be an http\(s\) URL$/ },
    { name: "bootstrap", file: "src/cli/bootstrap.ts", args: ["--issuer"], reason: /^Option '--issuer <value>' argument missing$/ },
    { name: "keys:rotate", file: "src/cli/keys.ts", args: [], reason: /^missing 'rotate'$/ },
    { name: "keys:rotate", file: "src/cli/keys.ts", args: ["spin"], reason: /^unknown command 'spin', expected 'rotate'$/ },
    { name: "keys:rotate", file: "src/cli/keys.ts", args: ["rotate", "now"], reason: /^unexpected argument 'now'$/ },
    { name: "import-oci", file: "src/cli/import-oci.ts", args: ["--repo", repo], reason: /^missing <OCI layout directory>$/ },
    { name: "import-oci", file: "src/cli/import-oci.ts", args: ["--repo", repo, "a", "b"], reason: /^unexpected argument 'b'$/ },
    { name: "import-oci", file: "src/cli/import-oci.ts", args: ["dir"], reason: /^--repo is required$/ },
    { name: "import-oci", file: "src/cli/import-oci.ts", args: ["--repo", "nope", "dir"], reason: /^--repo must be a repo uid/ },
    { name: "import-libraries", file: "src/cli/import-libraries.ts", args: [], reason: /^missing <maven repository or python distributions path>$/ },
  ];
  it("exit 2 with the reason and the usage line, and open no database", async () => {
    // Four at a time: each is a node process compiling TypeScript, on a small shared machine.
    const results: Exit[] = [];
    for (let i = 0; i < cases.length; i += 4) results.push(...(await Promise.all(cases.slice(i, i + 4).map((c) => run(c.file, c.args)))));
    results.forEach((r, i) => expectRefused(r, cases[i]!.name, cases[i]!.reason));
    // DATA_DIR was never opened: no database files, no lock.
    expect(readdirSync(dataDir)).toEqual([]);
  });
});
