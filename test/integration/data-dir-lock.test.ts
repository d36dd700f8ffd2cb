// The embedded database's data directory is open in one process at a time (issue 8: `npm run bootstrap` while
// `npm start` ran printed "created": true, and its write was lost). A second process, the server or any
// command, is refused at once with one line naming the directory, the process holding it and what to do, and
// writes nothing; once the holder has closed the database, exited or been killed, another process opens it.
import { execFile, spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { eq } from "drizzle-orm";
import { afterAll, describe, expect, it } from "vitest";
import { openPglite } from "../../src/db/client.js";
import { DataDirLockedError, LOCK_FILE } from "../../src/db/data-dir-lock.js";
import { groups } from "../../src/db/schema/index.js";

const root = new URL("../..", import.meta.url).pathname;
const dataDir = mkdtempSync(join(tmpdir(), "data-dir-lock-"));
const lockFile = join(dataDir, LOCK_FILE);
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

interface Exit {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a program of this repository as `npm run ...` does (tsx), on the embedded database in dataDir. */
function run(args: string[], env: Record<string, string> = {}): Promise<Exit> {
  return promisify(execFile)(join(root, "node_modules", ".bin", "tsx"), args, {
    cwd: root,
    env: { ...process.env, DATA_DIR: dataDir, DATABASE_URL: "", LOG_LEVEL: "warn", ...env },
    timeout: 120_000,
  }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (e: Exit) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
  );
}

/** Starts test/support/hold-data-dir-lock.ts (in one process, so its pid is the lock's) and waits until it holds the lock. */
async function startHolder(then: "exit" | "wait") {
  const child = spawn(process.execPath, ["--import", "tsx", join(root, "test/support/hold-data-dir-lock.ts"), dataDir, then], {
    cwd: root,
    stdio: ["ignore", "pipe", "inherit"],
  });
  const exited = once(child, "exit");
  const [line] = (await once(child.stdout, "data")) as [Buffer];
  expect(line.toString()).toBe("locked\n");
  return { pid: child.pid!, kill: () => child.kill("SIGKILL"), exited };
}

function lockPid(): number {
  return (JSON.parse(readFileSync(lockFile, "utf8")) as { pid: number }).pid;
}

/** Every file under a directory with its size and modification time. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of readdirSync(dir, { recursive: true, encoding: "utf8" })) {
    const s = statSync(join(dir, name));
    if (s.isFile()) out[name] = `${s.size} bytes, modified ${s.mtimeMs}`;
  }
  return out;
}

const bootstrapArgs = ["src/cli/bootstrap.ts", "--issuer", "https://idp.example.com", "--subject", "dave"];

/** Every program that opens the configured database: the server and each command of src/cli. */
const programs: Array<{ name: string; args: string[]; env?: Record<string, string> }> = [
  { name: "server (npm start)", args: ["src/main.ts"], env: { PORT: "0" } },
  { name: "npm run bootstrap", args: bootstrapArgs },
  { name: "npm run keys:rotate", args: ["src/cli/keys.ts", "rotate"] },
  { name: "npm run import-oci", args: ["src/cli/import-oci.ts", "--repo", `${"0".repeat(40)}/${"0".repeat(16)}`, dataDir] },
];

describe("the embedded database's data directory", () => {
  it("is refused to a second process at once, with one line saying which directory, held by whom, and what to do", async () => {
    const database = await openPglite(dataDir);
    try {
      expect(lockPid()).toBe(process.pid);
      const before = snapshot(dataDir);

      const results = await Promise.all(programs.map(async (p) => ({ name: p.name, ...(await run(p.args, p.env)) })));
      for (const r of results) {
        expect(r.code, r.name).toBe(1);
        expect(r.stdout, r.name).toBe("");
        const lines = r.stderr.trim().split("\n");
        expect(lines, r.name).toHaveLength(1); // and so no stack trace
        // the server logs JSON lines; the commands write plain text
        const message = r.name.startsWith("server") ? (JSON.parse(lines[0]!) as { msg: string }).msg : lines[0]!;
        expect(message, r.name).toContain(`the embedded database in ${dataDir} is in use by process ${process.pid} (`);
        expect(message, r.name).toContain("stop that process and retry, or set DATABASE_URL to a PostgreSQL database");
      }
      // nothing was written: not the files, not the lock
      expect(snapshot(dataDir)).toEqual(before);

      // nor can this process open it twice
      await expect(openPglite(dataDir)).rejects.toThrow(DataDirLockedError);
      await expect(openPglite(dataDir)).rejects.toThrow(`is in use by this process (pid ${process.pid})`);
      expect(await database.db.select().from(groups)).toEqual([]);
    } finally {
      await database.close();
    }
    expect(existsSync(lockFile)).toBe(false);
  });

  it("opens in another process once closed, and that process's write is kept", async () => {
    const r = await run(bootstrapArgs);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const { group } = JSON.parse(r.stdout) as { group: string; created: boolean };
    expect(JSON.parse(r.stdout)).toMatchObject({ created: true });
    expect(existsSync(lockFile)).toBe(false);

    const database = await openPglite(dataDir);
    try {
      expect(await database.db.select({ name: groups.name }).from(groups).where(eq(groups.uid, group))).toEqual([{ name: "default" }]);
    } finally {
      await database.close();
    }
  });

  it("is taken over from a process that was killed, and released by one that exits without closing it", async () => {
    const killed = await startHolder("wait");
    expect(lockPid()).toBe(killed.pid);
    await expect(openPglite(dataDir)).rejects.toThrow(`is in use by process ${killed.pid} (`);
    killed.kill();
    await killed.exited;
    // the lock file stays behind, naming a process that no longer exists
    expect(lockPid()).toBe(killed.pid);

    const database = await openPglite(dataDir);
    try {
      expect(lockPid()).toBe(process.pid);
      expect(await database.db.select({ name: groups.name }).from(groups)).toEqual([{ name: "default" }]);
    } finally {
      await database.close();
    }
    expect(existsSync(lockFile)).toBe(false);

    const exiting = await startHolder("exit");
    expect(await exiting.exited).toEqual([0, null]);
    expect(existsSync(lockFile)).toBe(false);
  });
});
