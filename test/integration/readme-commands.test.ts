// The README's import commands, run as written (`npm run -s ...` in a shell, from the repository's root) on
// the samples the repository ships, on an embedded database in a temporary directory: each exits 0 and prints
// JSON alone on stdout (no npm banner), holding what the README shows under it. And the README names no
// file outside the repository.
import { exec } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openPglite } from "../../src/db/client.js";
import { groups, repos } from "../../src/db/schema/index.js";
import { newChildUid, newRootUid } from "../../src/kernel/uidp.js";

const root = new URL("../..", import.meta.url).pathname;
const readme = readFileSync(join(root, "README.md"), "utf8");

interface Example {
  command: string;
  /** The JSON of the `# ` lines under the command: what the README says the command prints (in part). */
  shown: unknown;
}

/** The `npm run -s import-...` lines of the README's shell blocks, each with the output shown under it. */
function importExamples(): Example[] {
  const out: Example[] = [];
  for (const block of readme.matchAll(/^```sh\n([\s\S]*?)^```$/gm)) {
    const lines = block[1]!.split("\n");
    lines.forEach((line, i) => {
      if (!/^npm run -s import-/.test(line)) return;
      const comments: string[] = [];
      for (let j = i + 1; j < lines.length && lines[j]!.startsWith("# "); j++) comments.push(lines[j]!.slice(2));
      let shown: unknown;
      try {
        shown = JSON.parse(comments.join("\n"));
      } catch {
        throw new Error(`README: the lines under "${line}" are not the JSON it prints: ${comments.join(" ")}`);
      }
      out.push({ command: line, shown });
    });
  }
  return out;
}

const examples = importExamples();
let dataDir = "";
let repoUid = "";

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "readme-commands-"));
  // What the README's curl lines make before import-oci: an organization and a repo in it.
  const org = newRootUid();
  repoUid = newChildUid(org);
  const database = await openPglite(dataDir);
  await database.db.insert(groups).values({ uid: org, name: "local" });
  await database.db.insert(repos).values({ uid: repoUid, groupUid: org, name: "hello-server" });
  await database.close();
});
afterAll(() => {
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

describe("the README's import commands", () => {
  it("are one or more per importer, each followed by the JSON it prints", () => {
    expect(new Set(examples.map((e) => /^npm run -s (\S+)/.exec(e.command)![1]))).toEqual(new Set(["import-oci", "import-libraries", "import-advisories", "import-osv"]));
  });

  it.each(examples.map((e) => [e.command, e] as const))("%s: runs as pasted, printing JSON alone on stdout", { timeout: 180_000 }, async (_name, example) => {
    const { stdout, stderr } = await promisify(exec)(example.command, {
      cwd: root,
      env: { ...process.env, DATA_DIR: dataDir, DATABASE_URL: "", LOG_LEVEL: "warn", REPO: repoUid },
      timeout: 170_000,
    }).catch((err: { code: number; stdout: string; stderr: string }) => {
      throw new Error(`exit ${err.code}: ${err.stderr}`);
    });
    let printed: unknown;
    expect(() => (printed = JSON.parse(stdout)), `stdout is not JSON alone:\n${stdout}\nstderr:\n${stderr}`).not.toThrow();
    expect(printed).toMatchObject(example.shown as object);
  });
});

describe("the README", () => {
  it("names no file outside the repository, and every file it and the pages beside it link exists", () => {
    expect(readme).not.toMatch(/(?<!\.)\.\.\/[a-z]/i); // ("...": an ellipsis)
    const pages = ["README.md", "samples/README.md", "bench/README.md", "bench/LOG.md", ...readdirSync(join(root, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)];
    for (const page of pages) {
      for (const [, target] of readFileSync(join(root, page), "utf8").matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)) {
        if (/^[a-z]+:/.test(target!)) continue;
        const file = resolve(root, dirname(page), target!);
        expect(file.startsWith(root), `${page}: ${target}`).toBe(true);
        expect(existsSync(file), `${page}: ${target}`).toBe(true);
      }
    }
  });

  it("has a benchmarks page that stays a reference (under 300 lines; dated runs go to bench/LOG.md)", () => {
    expect(readFileSync(join(root, "bench/README.md"), "utf8").trimEnd().split("\n").length).toBeLessThan(300);
  });

  it("imports only what samples/ holds, or a path of the machine it names as such", () => {
    for (const e of examples) {
      const paths = e.command.split(/\s+/).filter((w) => w.includes("/") && !w.startsWith("-"));
      for (const p of paths) expect(existsSync(join(root, p)), `${e.command}: ${p}`).toBe(true);
    }
  });
});
