// A server that cannot start says why in one line naming the setting and what to do, and exits 1 (issue 26:
// a port in use, an unreachable database, a refused login or a mysql:// URL printed a JSON stack trace).
// Anything else (a bug) still logs its stack.
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type AddressInfo, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const root = new URL("../..", import.meta.url).pathname;
const dataDir = mkdtempSync(join(tmpdir(), "startup-errors-"));
let taken: Server;
let takenPort: number;

beforeAll(async () => {
  taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
  takenPort = (taken.address() as AddressInfo).port;
});
afterAll(() => {
  taken?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

interface Exit {
  code: number;
  stderr: string;
  stdout: string;
}

function start(env: Record<string, string>): Promise<Exit> {
  return new Promise((resolve) => {
    execFile(
      join(root, "node_modules", ".bin", "tsx"),
      ["src/main.ts"],
      {
        cwd: root,
        env: { ...process.env, DATA_DIR: dataDir, DATABASE_URL: "", HOST: "127.0.0.1", METRICS_ADDR: "off", LOG_LEVEL: "info", ...env },
        timeout: 120_000,
      },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? -1) : 0, stdout, stderr }),
    );
  });
}

/** Exit 1; the last line is the error, naming the setting and what to do; no stack trace anywhere. */
function expectOneLine(r: Exit, message: RegExp): void {
  expect(r.code, r.stderr).toBe(1);
  expect(r.stderr).not.toMatch(/stack|\n\s+at /);
  const lines = r.stderr.trimEnd().split("\n");
  const last = JSON.parse(lines.at(-1)!) as { level: string; msg: string; err?: unknown };
  expect(last.level).toBe("error");
  expect(last.err).toBeUndefined();
  expect(last.msg).toMatch(message);
  expect(lines.filter((l) => l.includes('"level":"error"'))).toHaveLength(1);
}

const pg = process.env.DATABASE_URL;
/** The test's PostgreSQL with another user or database. */
function pgWith(change: (u: URL) => void): string {
  const u = new URL(pg!);
  change(u);
  return u.toString();
}

describe("a server that cannot start", () => {
  it("PORT in use: names the port and says to choose another", async () => {
    const r = await start({ PORT: String(takenPort) });
    expectOneLine(r, new RegExp(`^configuration error: PORT ${takenPort}: another process already listens on 127\\.0\\.0\\.1:${takenPort}: stop it, or set PORT to a free port`));
    // Said before the database is opened (a first start would create the embedded one first: tens of seconds).
    expect(r.stderr).not.toMatch(/embedded database|database ready/);
  });

  it("DATABASE_URL of another database: refused before connecting, the password not echoed", async () => {
    const r = await start({ DATABASE_URL: "mysql://root:hunter2@127.0.0.1:3306/app" });
    expectOneLine(r, /^configuration error: DATABASE_URL must be a PostgreSQL URL \(postgres:\/\/.*or unset it to use the embedded database\), got a mysql: URL$/);
    expect(r.stderr).not.toContain("hunter2");
  });

  it("DATABASE_URL unreachable: says nothing listens there", async () => {
    const r = await start({ DATABASE_URL: "postgres://postgres:hunter2@127.0.0.1:1/app" });
    expectOneLine(r, /^failed to start: DATABASE_URL: nothing accepts connections at 127\.0\.0\.1:1: start PostgreSQL there, or correct DATABASE_URL/);
    expect(r.stderr).not.toContain("hunter2");
  });

  it.skipIf(!pg)("DATABASE_URL with a user PostgreSQL refuses: says to check the user and password", async () => {
    const r = await start({ DATABASE_URL: pgWith((u) => ((u.username = "no_such_user_26"), (u.password = "hunter2"))) });
    expectOneLine(r, /^failed to start: DATABASE_URL: PostgreSQL at .* refused user "no_such_user_26" \(.*\): check the user and password in DATABASE_URL$/);
    expect(r.stderr).not.toContain("hunter2");
  });

  it.skipIf(!pg)("DATABASE_URL naming a database that does not exist: says to create it", async () => {
    const r = await start({ DATABASE_URL: pgWith((u) => (u.pathname = "/no_such_database_26")) });
    expectOneLine(r, /^failed to start: DATABASE_URL: PostgreSQL at .* has no database "no_such_database_26": create it \(createdb /);
  });
});
