// The commands work while the server runs on the embedded database (issue 26: they were refused, which broke
// docs/importing.md's two-terminal flow): the server shares its database with them over a private unix socket
// (db/local-socket.ts), keeping one writer of the data directory. A command's transaction runs alone (the
// server's queries wait for it, and see it once committed), one left open by a command that goes away is
// rolled back, and the server hears the notifications the command's writes cause (a rotated signing key).
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer as createNetServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { eq } from "drizzle-orm";
import { PGlite } from "@electric-sql/pglite";
import postgres from "postgres";
import { afterAll, describe, expect, it } from "vitest";
import { openDatabase, openPglite, type Database } from "../../src/db/client.js";
import { LOCK_FILE } from "../../src/db/data-dir-lock.js";
import { serveLocally, SOCKET_FILE } from "../../src/db/local-socket.js";
import { groups } from "../../src/db/schema/index.js";
import { until } from "../support/poll.js";
import { startServerProcess, type ServerProcess } from "../support/server-process.js";

const root = new URL("../..", import.meta.url).pathname;
const dirs: string[] = [];
const scratch = (prefix: string) => {
  const d = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(d);
  return d;
};
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

interface Exit {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a command as `npm run` does (tsx), on the embedded database in dataDir. */
function command(dataDir: string, args: string[]): Promise<Exit> {
  return new Promise((resolve) => {
    execFile(
      join(root, "node_modules", ".bin", "tsx"),
      args,
      { cwd: root, env: { ...process.env, DATA_DIR: dataDir, DATABASE_URL: "", LOG_LEVEL: "warn" }, timeout: 120_000 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? -1) : 0, stdout, stderr }),
    );
  });
}

/** A one-image OCI layout tagged `tag` (config and manifest blobs, no layers). */
function ociLayout(tag: string): string {
  const dir = scratch("oci-layout-");
  const blob = (content: string) => {
    const digest = `sha256:${createHash("sha256").update(content).digest("hex")}`;
    const file = join(dir, "blobs", "sha256", digest.slice(7));
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, content);
    return { digest, size: Buffer.byteLength(content) };
  };
  const config = blob(JSON.stringify({ architecture: "amd64", os: "linux", rootfs: { type: "layers", diff_ids: [] } }));
  const manifest = blob(
    JSON.stringify({ schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json", config: { mediaType: "application/vnd.oci.image.config.v1+json", ...config }, layers: [] }),
  );
  writeFileSync(join(dir, "oci-layout"), JSON.stringify({ imageLayoutVersion: "1.0.0" }));
  writeFileSync(
    join(dir, "index.json"),
    JSON.stringify({
      schemaVersion: 2,
      manifests: [{ mediaType: "application/vnd.oci.image.manifest.v1+json", ...manifest, annotations: { "org.opencontainers.image.ref.name": tag } }],
    }),
  );
  return dir;
}

async function rest(server: ServerProcess, method: string, path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(server.baseUrl + path, {
    method,
    headers: { authorization: `Bearer ${server.token}`, ...(body ? { "content-type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

describe("the commands while npm start runs on the embedded database", () => {
  it("bootstrap, keys:rotate and import-oci work through the server, which sees their writes at once", async () => {
    const dataDir = scratch("shared-data-dir-");
    const server = await startServerProcess("", { DATA_DIR: dataDir, ISSUER_URL: "" });
    try {
      // The socket is named in the data directory, in a directory only this user may enter.
      const { path } = JSON.parse(readFileSync(join(dataDir, SOCKET_FILE), "utf8")) as { path: string };
      expect(statSync(dirname(path)).mode & 0o777).toBe(0o700);

      const boot = await command(dataDir, ["src/cli/bootstrap.ts", "--issuer", "https://idp.example.com", "--subject", "erin"]);
      expect(boot.code, boot.stderr).toBe(0);
      expect(JSON.parse(boot.stdout)).toMatchObject({ created: true });

      // docs/importing.md's flow: the repo created through the API, the images imported into it by the command.
      const repo = await rest(server, "POST", `/registry/v2/repos/${server.organization}`, { name: "static" });
      expect(repo.status, JSON.stringify(repo.json)).toBe(200);
      const imported = await command(dataDir, ["src/cli/import-oci.ts", "--repo", repo.json.uid as string, ociLayout("1.0")]);
      expect(imported.code, imported.stderr).toBe(0);
      const tags = await rest(server, "GET", `/registry/v2/tags?uidp.childrenOf=${repo.json.uid as string}`);
      expect((tags.json.tags as Array<{ name: string }>).map((t) => t.name)).toEqual(["1.0"]);

      // A key rotated by the command is published by the server at once (its keys are otherwise cached a
      // minute): the command's write notified the server.
      const rotated = await command(dataDir, ["src/cli/keys.ts", "rotate"]);
      expect(rotated.code, rotated.stderr).toBe(0);
      const { kid } = JSON.parse(rotated.stdout) as { kid: string };
      await until(
        "the server's published keys",
        async () => ((await (await fetch(`${server.baseUrl}/.well-known/jwks.json`)).json()) as { keys: Array<{ kid: string }> }).keys.map((k) => k.kid),
        (kids) => kids[0] === kid,
        3_000,
      );

      // Still the server's directory, and its token still works.
      expect((JSON.parse(readFileSync(join(dataDir, LOCK_FILE), "utf8")) as { pid: number }).pid).toBe(server.child.pid);
      expect((await rest(server, "GET", "/iam/v2/groups")).status).toBe(200);
    } finally {
      server.child.kill("SIGTERM");
      expect(await server.exited).toEqual({ code: 0, signal: null });
    }
    // Stopped: the socket and its name are gone, and a command opens the directory itself again.
    expect(existsSync(join(dataDir, SOCKET_FILE))).toBe(false);
    const again = await command(dataDir, ["src/cli/keys.ts", "rotate"]);
    expect(again.code, again.stderr).toBe(0);
  });
});

describe("a server that fails to start after opening the embedded database", () => {
  it("leaves neither its socket nor the socket's name behind (the metrics address it was given was taken)", async () => {
    const dataDir = scratch("shared-data-dir-");
    const tmp = scratch("shared-data-dir-tmp-"); // the child's tmpdir(), where its socket's directory goes
    const taken = createNetServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    try {
      const port = String((taken.address() as AddressInfo).port);
      const exit = await new Promise<Exit>((resolve) => {
        execFile(
          join(root, "node_modules", ".bin", "tsx"),
          ["src/main.ts"],
          { cwd: root, env: { ...process.env, DATA_DIR: dataDir, DATABASE_URL: "", PORT: "0", METRICS_ADDR: `127.0.0.1:${port}`, TMPDIR: tmp, LOG_LEVEL: "warn" }, timeout: 120_000 },
          (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? -1) : 0, stdout, stderr }),
        );
      });
      expect(exit.code, exit.stderr).toBe(1);
      // (A taken PORT is refused before the database opens: the metrics listener starts after it.)
      expect(exit.stderr).toContain(`METRICS_ADDR 127.0.0.1:${port}: cannot listen`);
    } finally {
      taken.close();
    }
    expect(existsSync(join(dataDir, LOCK_FILE))).toBe(false);
    expect(existsSync(join(dataDir, SOCKET_FILE))).toBe(false);
    expect(readdirSync(tmp).filter((name) => name.startsWith("apiserver-"))).toEqual([]);
  });
});

describe("a command's connection to the server's embedded database", () => {
  const row = (n: string) => ({ uid: n.repeat(40), parentUid: null, name: `org-${n}` });

  it("runs its transactions alone, rolls back what it leaves open, and notifies the server", async () => {
    const dataDir = scratch("shared-tx-");
    const server = await openPglite(dataDir, { shareWithCommands: true });
    let joined: Database | undefined;
    try {
      joined = await openDatabase({ databaseUrl: undefined, dataDir, share: "join" });

      // A command's transaction: the server's read waits for its commit, then sees its row.
      let commit!: () => void;
      const open = new Promise<void>((resolve) => (commit = resolve));
      let inserted!: () => void;
      const didInsert = new Promise<void>((resolve) => (inserted = resolve));
      const tx = joined.db.transaction(async (t) => {
        await t.insert(groups).values(row("a"));
        inserted();
        await open;
      });
      await didInsert;
      let read: string[] | undefined;
      const reading = server.db
        .select({ uid: groups.uid })
        .from(groups)
        .then((rows) => (read = rows.map((r) => r.uid)));
      await new Promise((r) => setTimeout(r, 300));
      expect(read).toBeUndefined();
      commit();
      await tx;
      await reading;
      expect(read).toEqual([row("a").uid]);

      // A command that goes away inside its transaction: rolled back, and the server goes on.
      const { path } = JSON.parse(readFileSync(join(dataDir, SOCKET_FILE), "utf8")) as { path: string };
      const raw = postgres({ path, max: 1, prepare: false, onnotice: () => {} });
      let rawInserted!: () => void;
      const rawDidInsert = new Promise<void>((resolve) => (rawInserted = resolve));
      const abandoned = raw
        .begin(async (t) => {
          await t`insert into groups (uid, name) values (${row("b").uid}, ${row("b").name})`;
          rawInserted();
          await new Promise(() => {});
        })
        .catch(() => "ended");
      await rawDidInsert;
      await raw.end({ timeout: 0 });
      expect(await abandoned).toBe("ended");
      expect(await server.db.select({ uid: groups.uid }).from(groups).where(eq(groups.uid, row("b").uid))).toEqual([]);

      // The server hears what the command notifies.
      const heard: string[] = [];
      await server.listen("shared_test", (p) => heard.push(p), () => {});
      await joined.db.execute("select pg_notify('shared_test', 'from a command')");
      await until("notifications", async () => heard, (h) => h.length > 0, 3_000);
      expect(heard).toEqual(["from a command"]);
    } finally {
      await joined?.close();
      await server.close();
    }
    expect(existsSync(join(dataDir, SOCKET_FILE))).toBe(false);
  });

  it("is rolled back and dropped when it holds a transaction idle too long", async () => {
    const client = await PGlite.create();
    const shared = await serveLocally(client, scratch("shared-idle-"), { idleInTransactionMs: 500 });
    const raw = postgres({ path: shared.path, max: 1, prepare: false, onnotice: () => {} });
    try {
      await client.exec("create table t (n int)");
      let began!: () => void;
      const didBegin = new Promise<void>((resolve) => (began = resolve));
      const stalled = raw
        .begin(async (t) => {
          await t`insert into t values (1)`;
          began();
          await new Promise((r) => setTimeout(r, 5_000));
          await t`insert into t values (2)`;
        })
        .then(
          () => "committed",
          () => "refused",
        );
      await didBegin;
      const started = Date.now();
      // The server's query waits for the idle limit, not for the command.
      expect((await client.query("select count(*)::int as n from t")).rows).toEqual([{ n: 0 }]);
      expect(Date.now() - started).toBeLessThan(3_000);
      expect(await stalled).toBe("refused");
    } finally {
      await raw.end({ timeout: 0 });
      await shared.close();
      await client.close();
    }
  });
});
