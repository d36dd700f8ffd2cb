// An exclusive lock on the embedded database's data directory, held by one process at a time.
//
// PGlite, like PostgreSQL in single-user mode, assumes that it alone writes its files, but takes no lock of
// its own (the postmaster.pid it writes always names pid -42): a second process opens the same directory
// without complaint, and one of the two loses its writes, or the directory is corrupted. So the directory
// holds a lock file naming the process that has it open, created atomically; opening it while that process
// runs fails at once with a DataDirLockedError. The lock is removed on close and on process exit; one left by
// a process that no longer runs (killed, crashed) is taken over.
import { linkSync, readFileSync, renameSync, unlinkSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { log } from "../kernel/log.js";

/** The lock file's name inside the data directory. */
export const LOCK_FILE = "apiserver.lock";

/** What a lock file says about the process holding it. */
interface Holder {
  pid: number;
  /** The holder's command line, to tell the user which of their processes it is. */
  command: string;
  since: string;
}

/** The data directory is open in another process, or already in this one. */
export class DataDirLockedError extends Error {
  constructor(
    readonly dataDir: string,
    readonly pid: number,
    command: string,
  ) {
    const who = pid === process.pid ? `this process (pid ${pid})` : `process ${pid} (${command})`;
    super(
      `the embedded database in ${dataDir} is in use by ${who}, and can be opened by one process at a time: ` +
        "stop that process and retry, or set DATABASE_URL to a PostgreSQL database to run several processes on it " +
        `(lock file ${join(dataDir, LOCK_FILE)})`,
    );
    this.name = "DataDirLockedError";
  }
}

export interface DataDirLock {
  /** Removes the lock file (if it is still this lock's). Idempotent. */
  release(): void;
}

/** Lock files this process holds: a lock naming this process is live only if it is one of them. */
const held = new Set<string>();

function errorCode(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException).code;
}

/** The lock file's text, or undefined when there is none. */
function readLock(file: string): string | undefined {
  try {
    return readFileSync(file, "utf8");
  } catch (err) {
    if (errorCode(err) === "ENOENT") return undefined;
    throw err;
  }
}

/** The holder a lock file names; undefined when it names none (not written by this module: stale). */
function parseHolder(text: string): Holder | undefined {
  try {
    const { pid, command, since } = JSON.parse(text) as Partial<Holder>;
    if (!Number.isInteger(pid) || pid! <= 0) return undefined;
    return { pid: pid!, command: String(command ?? "?"), since: String(since ?? "?") };
  } catch {
    return undefined;
  }
}

/**
 * Whether the holder still runs. A lock naming this process but not held by it was left by an earlier process
 * that had the same pid (a restarted container, say). EPERM: the process exists, under another user.
 */
function isLive(holder: Holder, file: string): boolean {
  if (holder.pid === process.pid) return held.has(file);
  try {
    process.kill(holder.pid, 0);
    return true;
  } catch (err) {
    return errorCode(err) === "EPERM";
  }
}

/**
 * One look at an existing lock: throws DataDirLockedError when its holder runs, otherwise removes it so the
 * caller can try again. The stale lock is moved aside rather than deleted: if another process took it over
 * since it was read, what moved is that process's live lock, which is put back (the caller then finds it).
 */
function removeIfStale(dataDir: string, file: string): void {
  const seen = readLock(file);
  if (seen === undefined) return; // released meanwhile
  const holder = parseHolder(seen);
  if (holder && isLive(holder, file)) throw new DataDirLockedError(dataDir, holder.pid, holder.command);

  const aside = `${file}.stale-${process.pid}`;
  try {
    renameSync(file, aside);
  } catch (err) {
    if (errorCode(err) === "ENOENT") return; // another process removed it first
    throw err;
  }
  const moved = readFileSync(aside, "utf8");
  if (moved !== seen) {
    try {
      linkSync(aside, file);
    } catch (err) {
      if (errorCode(err) !== "EEXIST") throw err;
    }
  } else {
    log.warn("took over a stale lock of the embedded database", { dataDir, holder });
  }
  unlinkSync(aside);
}

/**
 * Locks an existing data directory for this process, or throws DataDirLockedError naming the process that
 * holds it. Synchronous, so that two opens in one process cannot interleave.
 */
export function lockDataDir(dataDir: string): DataDirLock {
  const file = resolve(dataDir, LOCK_FILE);
  const self: Holder = { pid: process.pid, command: process.argv.slice(1).join(" "), since: new Date().toISOString() };
  const text = JSON.stringify(self) + "\n";
  // Written in full under a name of its own, then linked into place: link(2) fails when the lock file exists,
  // so the lock appears atomically, with its content (never empty, as a file opened with O_EXCL is at first).
  const temp = `${file}.new-${process.pid}`;
  writeFileSync(temp, text);
  try {
    for (;;) {
      try {
        linkSync(temp, file);
        break;
      } catch (err) {
        if (errorCode(err) !== "EEXIST") throw err;
      }
      // Ends the loop by throwing, unless a stale lock was removed (or released) and the next link may succeed.
      removeIfStale(dataDir, file);
    }
  } finally {
    unlinkSync(temp);
  }
  held.add(file);

  let released = false;
  const release = (): void => {
    if (released) return;
    released = true;
    held.delete(file);
    process.off("exit", release);
    // Only this lock: never a lock another process took over after this one was removed. Failing to remove it
    // (the directory was deleted, say) is harmless: a lock whose process has ended is taken over.
    try {
      if (readLock(file) === text) unlinkSync(file);
    } catch {
      // see above
    }
  };
  process.on("exit", release);
  return { release };
}
