// The import commands of the README and of the pages under docs/, run as written (`npm run -s ...` in a shell,
// from the repository's root) on the samples the repository ships, on an embedded database in a temporary
// directory: each exits 0 and prints JSON alone on stdout (no npm banner), holding what its page shows under it.
// And the documentation's links: the README names no file outside the repository, lists every page of docs/,
// and every relative link of these pages leads to a file that exists and, with a #fragment, to a heading of it.
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
const docsPages = readdirSync(join(root, "docs"))
  .filter((f) => f.endsWith(".md"))
  .map((f) => `docs/${f}`);
/** The pages whose commands are run: the README and docs/*.md. */
const commandPages = ["README.md", ...docsPages];
/** The pages whose links are checked. */
const linkPages = [...commandPages, "samples/README.md", "bench/README.md", "bench/LOG.md"];
const read = (page: string): string => readFileSync(join(root, page), "utf8");

interface Example {
  page: string;
  command: string;
  /** The JSON of the `# ` lines under the command: what the page says the command prints (in part). */
  shown: unknown;
}

/** The `npm run -s import-...` lines of a page's shell blocks, each with the output shown under it. */
function importExamples(page: string): Example[] {
  const out: Example[] = [];
  for (const block of read(page).matchAll(/^```sh\n([\s\S]*?)^```$/gm)) {
    const lines = block[1]!.split("\n");
    lines.forEach((line, i) => {
      if (!/^npm run -s import-/.test(line)) return;
      const comments: string[] = [];
      for (let j = i + 1; j < lines.length && lines[j]!.startsWith("# "); j++) comments.push(lines[j]!.slice(2));
      let shown: unknown;
      try {
        shown = JSON.parse(comments.join("\n"));
      } catch {
        throw new Error(`${page}: the lines under "${line}" are not the JSON it prints: ${comments.join(" ")}`);
      }
      out.push({ page, command: line, shown });
    });
  }
  return out;
}

const examples = commandPages.flatMap(importExamples);

/** GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces as hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

/** The anchors of a Markdown page's headings (outside code blocks), a repeated one numbered as GitHub does. */
function anchors(text: string): Set<string> {
  const out = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of text.split("\n")) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    const m = fenced ? null : /^#{1,6}\s+(.+?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** A page's relative links (`[text](target#fragment)`, in code blocks too), each with its fragment. */
function links(page: string): { target: string; fragment: string | undefined }[] {
  return [...read(page).matchAll(/\]\(([^)#\s]*)(?:#([^)\s]*))?\)/g)]
    .map(([, target, fragment]) => ({ target: target!, fragment }))
    .filter((l) => !/^[a-z]+:/.test(l.target) && (l.target !== "" || l.fragment !== undefined));
}
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

describe("the documentation's import commands", () => {
  it("are one or more per importer, each followed by the JSON it prints", () => {
    expect(new Set(examples.map((e) => /^npm run -s (\S+)/.exec(e.command)![1]))).toEqual(new Set(["import-oci", "import-libraries", "import-advisories", "import-osv"]));
  });

  it.each(examples.map((e) => [`${e.page}: ${e.command}`, e] as const))("%s: runs as pasted, printing JSON alone on stdout", { timeout: 180_000 }, async (_name, example) => {
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

describe("the README and the pages it links", () => {
  it("names no file outside the repository, and every file it and the pages beside it link exists", () => {
    expect(readme).not.toMatch(/(?<!\.)\.\.\/[a-z]/i); // ("...": an ellipsis)
    for (const page of linkPages) {
      for (const { target } of links(page)) {
        if (target === "") continue;
        const file = resolve(root, dirname(page), target);
        expect(file.startsWith(root), `${page}: ${target}`).toBe(true);
        expect(existsSync(file), `${page}: ${target}`).toBe(true);
      }
    }
  });

  it("links headings that exist: every #fragment of a link to a Markdown page names one of its headings", () => {
    const broken: string[] = [];
    for (const page of linkPages) {
      for (const { target, fragment } of links(page)) {
        if (fragment === undefined) continue;
        const file = target === "" ? join(root, page) : resolve(root, dirname(page), target);
        if (!file.endsWith(".md") || !existsSync(file)) continue;
        if (!anchors(readFileSync(file, "utf8")).has(decodeURIComponent(fragment))) broken.push(`${page}: ${target}#${fragment}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("finds the heading anchors as GitHub makes them", () => {
    const a = anchors("# Title\n## Browser clients (CORS)\n```sh\n# not a heading\n```\n## Production: bootstrap and `token` exchange\n## Title\n");
    expect([...a]).toEqual(["title", "browser-clients-cors", "production-bootstrap-and-token-exchange", "title-1"]);
  });

  it("stays a short start (under 12 KB) and lists every page of docs/", () => {
    expect(Buffer.byteLength(readme)).toBeLessThan(12 * 1024);
    const linked = new Set(links("README.md").map((l) => l.target));
    expect(docsPages.filter((p) => !linked.has(p))).toEqual([]);
  });

  it("has a benchmarks page that stays a reference (under 300 lines; dated runs go to bench/LOG.md)", () => {
    expect(readFileSync(join(root, "bench/README.md"), "utf8").trimEnd().split("\n").length).toBeLessThan(300);
  });

  it("imports only what samples/ holds, or a path of the machine it names as such", () => {
    for (const e of examples) {
      const paths = e.command.split(/\s+/).filter((w) => w.includes("/") && !w.startsWith("-"));
      for (const p of paths) expect(existsSync(join(root, p)), `${e.page}: ${e.command}: ${p}`).toBe(true);
    }
  });
});
