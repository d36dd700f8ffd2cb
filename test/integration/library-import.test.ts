// Importing library artifacts: the test writes a Maven repository with maven-metadata.xml, one without (the
// Debian form, with its `debian` pseudo-version), a malformed pom, Python dist-info directories and a wheel,
// imports them, re-imports (nothing changes), changes one file (only its rows change), and imports the
// machine's own /usr/share/maven-repo and /usr/lib/python3/dist-packages when present.
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { asc, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Ecosystem } from "../../gen/chainguard/platform/libraries/v2/artifacts_pb.js";
import { libraryArtifacts, libraryArtifactVersions } from "../../src/db/schema/index.js";
import { importLibraries } from "../../src/libraries/import.js";
import { openTestDatabase, type TestDatabase } from "../support/database.js";
import { zip } from "../support/zip.js";
import { runCli } from "../support/cli.js";

function write(path: string, content: string | Buffer) {
  mkdirSync(join(path, ".."), { recursive: true });
  writeFileSync(path, content);
}

const pom = (g: string, a: string, v: string, name: string, description: string) =>
  `<?xml version="1.0"?>\n<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion><groupId>${g}</groupId><artifactId>${a}</artifactId><version>${v}</version><name>${name}</name><description>${description}</description></project>\n`;

const metadata = (name: string, version: string, summary: string) => `Metadata-Version: 2.1\nName: ${name}\nVersion: ${version}\nSummary: ${summary}\n\nLong description.\n`;

let db: TestDatabase;
let root: string;

beforeAll(async () => {
  db = await openTestDatabase();
  root = mkdtempSync(join(tmpdir(), "libraries-"));
  // Maven with metadata: versions listed there, poms beside, one jar.
  const m = join(root, "maven", "org", "example", "widget");
  write(
    join(m, "maven-metadata.xml"),
    `<metadata><groupId>org.example</groupId><artifactId>widget</artifactId><versioning><latest>1.10</latest><release>1.10</release><versions><version>1.2</version><version>1.10</version><version>1.10-rc1</version></versions><lastUpdated>20240101000000</lastUpdated></versioning></metadata>`,
  );
  for (const v of ["1.2", "1.10", "1.10-rc1"]) write(join(m, v, `widget-${v}.pom`), pom("org.example", "widget", v, "Widget", `Widget ${v}`));
  write(join(m, "1.10", "widget-1.10.jar"), Buffer.alloc(1234));
  // Maven without metadata (Debian): version directories, a `debian` symlink copy, a malformed pom.
  const d = join(root, "maven", "com", "acme", "gadget");
  for (const v of ["2.0", "2.0.1"]) write(join(d, v, `gadget-${v}.pom`), pom("com.acme", "gadget", v, "Gadget", "Acme gadget"));
  symlinkSync(join(d, "2.0.1"), join(d, "debian"));
  write(join(d, "3.0", "gadget-3.0.pom"), "<project><groupId>com.acme</groupId><artifactId>gadget</artifactId><version>3.0</version>");
  // Python: two dist-info versions of one name (spelled differently), a wheel, a broken wheel.
  write(join(root, "py", "Friendly_Bard-1.0.dist-info", "METADATA"), metadata("Friendly_Bard", "1.0", "Bard 1.0"));
  write(join(root, "py", "friendly.bard-1.10.dist-info", "METADATA"), metadata("friendly.bard", "1.10", "Bard 1.10"));
  write(join(root, "py", "friendly_bard-1.10a1.dist-info", "METADATA"), metadata("friendly-bard", "1.10a1", "Bard pre"));
  write(join(root, "py", "nodeps-0.1-py3-none-any.whl"), zip({ "nodeps/__init__.py": "", "nodeps-0.1.dist-info/METADATA": metadata("NoDeps", "0.1", "No deps") }));
  write(join(root, "py", "broken-1.0-py3-none-any.whl"), "not a zip");
  write(join(root, "py", "noversion-1.0.dist-info", "METADATA"), "Metadata-Version: 2.1\nName: noversion\n");
});

afterAll(async () => {
  await db?.dispose();
  if (root) rmSync(root, { recursive: true, force: true });
});

async function versionsOf(uid: string) {
  return db.db.select().from(libraryArtifactVersions).where(eq(libraryArtifactVersions.artifactUid, uid)).orderBy(asc(libraryArtifactVersions.ordinal));
}

describe("import-libraries", () => {
  it("imports Maven layouts with and without metadata and Python distributions, skipping bad files with reasons", async () => {
    const s = await importLibraries(db.db, [join(root, "maven"), join(root, "py")]);
    expect(s.artifacts).toEqual({ added: 4, changed: 0, unchanged: 0 });
    expect(s.versions).toEqual({ added: 9, changed: 0, unchanged: 0 });
    const reasons = s.skipped.map((x) => `${x.path.slice(root.length)}: ${x.reason}`);
    expect(reasons).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/gadget\/debian: Debian pseudo-version/),
        expect.stringMatching(/gadget\/3\.0: .*malformed XML/),
        expect.stringMatching(/broken-1\.0-py3-none-any\.whl: .*not a zip/),
        expect.stringMatching(/noversion-1\.0\.dist-info: .*no Version/),
      ]),
    );
    expect(s.skipped).toHaveLength(4);

    const artifacts = await db.db.select().from(libraryArtifacts).orderBy(asc(libraryArtifacts.uid));
    expect(artifacts.map((a) => [a.uid, a.ecosystem, a.name, a.latestVersion, a.versionCount, a.description])).toEqual([
      ["maven/com.acme:gadget", Ecosystem.JAVA, "com.acme:gadget", "2.0.1", 2, "Acme gadget"],
      ["maven/org.example:widget", Ecosystem.JAVA, "org.example:widget", "1.10", 3, "Widget 1.10"],
      ["pypi/friendly-bard", Ecosystem.PYTHON, "friendly.bard", "1.10", 3, "Bard 1.10"],
      ["pypi/nodeps", Ecosystem.PYTHON, "NoDeps", "0.1", 1, "No deps"],
    ]);
    expect((await versionsOf("maven/org.example:widget")).map((v) => [v.version, v.sizeBytes])).toEqual([
      ["1.2", 0],
      ["1.10-rc1", 0],
      ["1.10", 1234],
    ]);
    expect((await versionsOf("pypi/friendly-bard")).map((v) => v.version)).toEqual(["1.0", "1.10a1", "1.10"]);
    expect((await versionsOf("pypi/nodeps"))[0]?.sizeBytes).toBeGreaterThan(0);
  });

  it("changes nothing on a second run", async () => {
    const before = await db.db.select().from(libraryArtifactVersions).orderBy(asc(libraryArtifactVersions.uid));
    const s = await importLibraries(db.db, [join(root, "maven"), join(root, "py")]);
    expect(s.artifacts).toEqual({ added: 0, changed: 0, unchanged: 4 });
    expect(s.versions).toEqual({ added: 0, changed: 0, unchanged: 9 });
    expect(await db.db.select().from(libraryArtifactVersions).orderBy(asc(libraryArtifactVersions.uid))).toEqual(before);
  });

  it("rewrites only the rows of a changed file, and adds a fixed one", async () => {
    const before = new Map((await db.db.select().from(libraryArtifactVersions)).map((r) => [r.uid, r]));
    const d = join(root, "maven", "com", "acme", "gadget");
    write(join(d, "2.0", "gadget-2.0.pom"), pom("com.acme", "gadget", "2.0", "Gadget", "Acme gadget, revised"));
    write(join(d, "3.0", "gadget-3.0.pom"), pom("com.acme", "gadget", "3.0", "Gadget", "Acme gadget 3"));
    const s = await importLibraries(db.db, [join(root, "maven"), join(root, "py")]);
    expect(s.artifacts).toEqual({ added: 0, changed: 1, unchanged: 3 });
    expect(s.versions).toEqual({ added: 1, changed: 1, unchanged: 8 });
    const after = await db.db.select().from(libraryArtifactVersions);
    for (const r of after) {
      if (r.uid === "maven/com.acme:gadget@2.0") expect(r.description).toBe("Acme gadget, revised");
      else if (r.uid === "maven/com.acme:gadget@3.0") expect(before.has(r.uid)).toBe(false);
      else if (r.artifactUid !== "maven/com.acme:gadget") expect(r).toEqual(before.get(r.uid));
    }
    const [gadget] = await db.db.select().from(libraryArtifacts).where(eq(libraryArtifacts.uid, "maven/com.acme:gadget"));
    expect([gadget?.latestVersion, gadget?.versionCount, gadget?.description]).toEqual(["3.0", 3, "Acme gadget 3"]);
  });

  const real = ["/usr/share/maven-repo", "/usr/lib/python3/dist-packages"].filter((p) => existsSync(p));
  it.skipIf(real.length === 0)("imports the machine's Debian Maven repository and Python dist-packages", async () => {
    const s = await importLibraries(db.db, real);
    expect(s.artifacts.added).toBeGreaterThan(0);
    const rows = await db.db.select().from(libraryArtifactVersions);
    expect(rows.some((r) => r.version === "debian")).toBe(false);
    if (real.includes("/usr/share/maven-repo")) expect(rows.some((r) => r.artifactUid.startsWith("maven/"))).toBe(true);
    const again = await importLibraries(db.db, real);
    expect(again.artifacts.added + again.artifacts.changed + again.versions.added + again.versions.changed).toBe(0);
  });
});

// The command, end to end on an embedded database in a temporary directory: a usage error exits 2, an import
// 0 with the JSON summary on stdout and the skipped files on stderr; a second run adds nothing.
describe("npm run import-libraries", () => {
  const run = (args: string[], env: Record<string, string>) => runCli("import-libraries.ts", args, env);

  it("imports, reports, and is idempotent", { timeout: 120_000 }, async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "libraries-cli-data-"));
    try {
      const env = { DATA_DIR: dataDir };
      expect((await run([], env)).code).toBe(2);
      const first = await run([join(root, "py")], env);
      expect(first.code, first.stderr).toBe(0);
      const summary = JSON.parse(first.stdout) as { artifacts: { added: number }; versions: { added: number }; skipped: { path: string; reason: string }[] };
      expect(summary.artifacts.added).toBe(2);
      expect(summary.versions.added).toBe(4);
      expect(summary.skipped.map((x) => x.path.slice(root.length)).sort()).toEqual(["/py/broken-1.0-py3-none-any.whl", "/py/noversion-1.0.dist-info"]);
      expect(first.stderr).toMatch(/skipped .*broken-1\.0-py3-none-any\.whl: /);
      const second = JSON.parse((await run([join(root, "py")], env)).stdout) as { artifacts: Record<string, number>; versions: Record<string, number> };
      expect([second.artifacts, second.versions]).toEqual([
        { added: 0, changed: 0, unchanged: 2 },
        { added: 0, changed: 0, unchanged: 4 },
      ]);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
