// The README's "Push and pull images" commands, run as written with skopeo against a test server (its
// address for localhost:8080, an owner's token for $TOKEN, a temporary directory for /tmp): each succeeds,
// list-tags prints what the README shows, and the image pulled back has the sample's very blobs.
import { exec } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";

const root = new URL("../..", import.meta.url).pathname;
const readme = readFileSync(join(root, "README.md"), "utf8");
const run = promisify(exec);

/** The README's push-and-pull block: its command lines, each with the `# ` lines under it. */
function registryExamples(): Array<{ command: string; shown: string }> {
  const section = readme.slice(readme.indexOf("### Push and pull images"));
  const block = /```sh\n([\s\S]*?)```/.exec(section)![1]!;
  const lines = block.split("\n");
  const out: Array<{ command: string; shown: string }> = [];
  lines.forEach((line, i) => {
    if (line === "" || line.startsWith("# ")) return;
    const shown: string[] = [];
    for (let j = i + 1; j < lines.length && lines[j]!.startsWith("# "); j++) shown.push(lines[j]!.slice(2));
    out.push({ command: line, shown: shown.join("\n") });
  });
  return out;
}

let server: TestServer;
let world: World;
let dir: string;

beforeAll(async () => {
  server = await startTestServer();
  world = await seedWorld(server, "local");
  dir = mkdtempSync(join(tmpdir(), "apiserver-readme-registry-"));
}, 120_000);
afterAll(async () => {
  await server?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const hasSkopeo = await run("skopeo --version").then(
  () => true,
  () => false,
);

describe.skipIf(!hasSkopeo)("README: push and pull images with skopeo", () => {
  it("runs every command as written", async () => {
    const examples = registryExamples();
    expect(examples.map((e) => e.command.split(" ")[0])).toContain("skopeo");
    const host = new URL(server.baseUrl).host;
    const env = { ...process.env, TOKEN: world.token.owner, REGISTRY_AUTH_FILE: join(dir, "auth.json"), HOME: dir };
    for (const { command, shown } of examples) {
      const cmd = command.replaceAll("localhost:8080", host).replaceAll("/tmp/", `${dir}/`);
      const { stdout } = await run(cmd, { cwd: root, env, timeout: 60_000 });
      if (shown) expect(JSON.parse(stdout.replaceAll(host, "localhost:8080"))).toEqual(JSON.parse(shown));
      if (command.includes("registry/v2/repos")) expect(JSON.parse(stdout)).toMatch(new RegExp(`^${world.org}/[0-9a-f]{16}$`));
    }
    // The image pulled back holds the sample's blobs, byte for byte.
    const digests = (d: string) =>
      readdirSync(join(d, "blobs", "sha256"))
        .map((f) => [f, createHash("sha256").update(readFileSync(join(d, "blobs", "sha256", f))).digest("hex")])
        .sort();
    const pulled = digests(join(dir, "hello"));
    for (const [name, hash] of pulled) expect(hash).toBe(name);
    expect(pulled.map(([n]) => n)).toEqual(digests(join(root, "samples", "oci-layout")).map(([n]) => n));
  }, 180_000);
});
