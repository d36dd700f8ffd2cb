// The running server shares its embedded database with the commands of the same user (`npm run bootstrap`,
// `keys:rotate`, `import-*`), so they work while `npm start` runs, and the data directory keeps one writer:
// the server's PGlite instance is the only one that opens its files.
//
// The server listens on a unix socket in a directory of its own (mode 0700, under the system's temporary
// directory: a socket path must be short), and names it in the data directory (SOCKET_FILE). Only the user
// running the server (and root) can connect: the directory's permissions are the authorisation, as for the
// data directory itself. A command speaks the PostgreSQL protocol to it (postgres.js, as on PostgreSQL).
//
// PGlite is one session running one transaction at a time, so the socket is shared at transaction
// granularity: a command's messages run while it holds PGlite's transaction lock, which it takes with its
// first message and gives back when the database reports it idle (ReadyForQuery 'I'), i.e. between its
// transactions. The server's own queries and transactions wait meanwhile and never run inside a command's
// transaction, nor the reverse. A command that dies or stalls inside a transaction is rolled back (on
// disconnect, or after IDLE_IN_TRANSACTION_MS without a message), so it cannot hold the server up for long.
// The notifications its writes cause (signing keys rotated, grants changed: the tables' triggers) are
// delivered in this same session, to the server's own listeners, which so see a command's writes as they see
// a replica's on PostgreSQL.
//
// @electric-sql/pglite-socket does the same in principle, but every release pins one exact PGlite version (and
// seven extension packages) as peer dependencies, none of them this project's, and it shares the instance
// either for a whole connection (the server would stall for a whole import) or message by message (the
// server's statements could run inside a command's open transaction).
import { chmodSync, mkdtempSync, rmSync, writeFileSync, readFileSync, unlinkSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { PGlite } from "@electric-sql/pglite";
import { log } from "../kernel/log.js";

/** The file in the data directory naming the socket of the server that has it open. */
export const SOCKET_FILE = "apiserver.socket";

/** How long a command may hold a transaction open without sending anything, before it is rolled back. */
export const IDLE_IN_TRANSACTION_MS = 30_000;

/** What SOCKET_FILE holds. */
export interface SocketPointer {
  pid: number;
  path: string;
}

/** The socket the server with this pid serves for the data directory, if it serves one. */
export function readSocketPointer(dataDir: string, pid: number): string | undefined {
  try {
    const pointer = JSON.parse(readFileSync(join(dataDir, SOCKET_FILE), "utf8")) as Partial<SocketPointer>;
    return pointer.pid === pid && typeof pointer.path === "string" ? pointer.path : undefined;
  } catch {
    return undefined;
  }
}

// Protocol codes of the startup phase (no type byte).
const SSL_REQUEST = 80877103;
const GSSENC_REQUEST = 80877104;
const CANCEL_REQUEST = 80877102;
const PROTOCOL_3 = 196608;
/** PostgreSQL's own limit on a startup packet. */
const MAX_STARTUP_BYTES = 10_000;

function message(type: string, body: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(5);
  head.write(type, 0, "latin1");
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

const cstring = (s: string) => Buffer.from(s + "\0", "utf8");
const int32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeInt32BE(n);
  return b;
};

/** The answer to a StartupMessage: no password (the socket's permissions are the authorisation). */
function startupReply(parameters: Record<string, string>): Buffer {
  return Buffer.concat([
    message("R", int32(0)),
    ...Object.entries(parameters).map(([k, v]) => message("S", Buffer.concat([cstring(k), cstring(v)]))),
    message("K", Buffer.concat([int32(process.pid), int32(0)])),
    message("Z", Buffer.from("I", "latin1")),
  ]);
}

function fatal(text: string): Buffer {
  return message("E", Buffer.concat([cstring("SFATAL"), cstring("C08P01"), cstring(`M${text}`), Buffer.from([0])]));
}

/** Sync, then a simple query ROLLBACK: ends whatever a command left (an aborted batch, an open transaction). */
const ROLLBACK = Buffer.concat([message("S"), message("Q", cstring("ROLLBACK"))]);

export interface LocalSocket {
  path: string;
  close(): Promise<void>;
}

/** Serves `client` to the commands on a private unix socket, named in dataDir/SOCKET_FILE. */
export async function serveLocally(client: PGlite, dataDir: string, opts: { idleInTransactionMs?: number } = {}): Promise<LocalSocket> {
  const idleMs = opts.idleInTransactionMs ?? IDLE_IN_TRANSACTION_MS;
  const { rows } = await client.query<{ name: string; setting: string }>(
    "select name, setting from pg_settings where name in ('server_version', 'server_encoding', 'client_encoding', 'DateStyle', 'IntervalStyle', 'TimeZone', 'integer_datetimes', 'standard_conforming_strings')",
  );
  const parameters = Object.fromEntries(rows.map((r) => [r.name, r.setting]));

  const dir = mkdtempSync(join(tmpdir(), "apiserver-")); // mode 0700
  chmodSync(dir, 0o700);
  const path = join(dir, "db.sock");
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    serveConnection(client, socket, parameters, idleMs);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(path, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const pointer = join(dataDir, SOCKET_FILE);
  writeFileSync(pointer, JSON.stringify({ pid: process.pid, path } satisfies SocketPointer) + "\n");
  log.debug("embedded database shared with local commands", { socket: path });
  // The socket's name and directory go with the process even when it exits without closing (a start that
  // fails after the database opened, its port taken, ends with process.exit), as the data directory's lock does.
  const unname = (): void => {
    try {
      if (readSocketPointer(dataDir, process.pid) === path) unlinkSync(pointer);
    } catch {
      // gone already
    }
  };
  const removeAtExit = (): void => {
    unname();
    rmSync(dir, { recursive: true, force: true });
  };
  process.on("exit", removeAtExit);
  let closed: Promise<void> | undefined;
  return {
    path,
    close() {
      closed ??= (async () => {
        process.off("exit", removeAtExit);
        unname();
        for (const s of sockets) s.destroy();
        await new Promise<void>((resolve) => server.close(() => resolve()));
        rmSync(dir, { recursive: true, force: true });
      })();
      return closed;
    },
  };
}

/** One command's connection: startup answered here, then its messages run on PGlite, a transaction at a time. */
function serveConnection(client: PGlite, socket: Socket, parameters: Record<string, string>, idleMs: number): void {
  let buffered: Buffer = Buffer.alloc(0);
  let started = false;
  let batch: Buffer[] = [];
  /** PGlite's transaction lock while this connection holds it (from its first message to its next idle). */
  let release: (() => void) | undefined;
  let idle: NodeJS.Timeout | undefined;
  let work = Promise.resolve();
  let ended = false;

  const acquire = () =>
    new Promise<() => void>((resolve) => {
      void client._runExclusiveTransaction(() => new Promise<void>((done) => resolve(done)));
    });

  const run = async (input: Buffer) => {
    release ??= await acquire();
    if (ended) return;
    const { messages, data } = await client.runExclusive(() => client.execProtocol(input, { throwOnError: false }));
    socket.write(data);
    const ready = messages.findLast((m) => m.name === "readyForQuery") as { status: string } | undefined;
    if (ready?.status === "I") {
      release();
      release = undefined;
    }
  };

  const end = () => {
    if (ended) return;
    ended = true;
    clearTimeout(idle);
    work = work.then(async () => {
      if (!release) return;
      // Whatever the command left open is rolled back before the server goes on.
      await client.runExclusive(() => client.execProtocol(ROLLBACK, { throwOnError: false })).catch(() => {});
      release();
      release = undefined;
    });
  };

  const enqueue = (input: Buffer) => {
    clearTimeout(idle);
    work = work
      .then(() => run(input))
      .then(
        () => {
          if (release && !ended) {
            idle = setTimeout(() => {
              log.warn("a local command held the embedded database idle in a transaction: rolled back", { idleMs });
              socket.destroy();
            }, idleMs);
          }
        },
        (err: unknown) => {
          log.warn("a local command's message failed on the embedded database", { err });
          socket.destroy();
        },
      );
  };

  socket.on("data", (chunk: Buffer) => {
    buffered = buffered.length ? Buffer.concat([buffered, chunk]) : chunk;
    for (;;) {
      if (!started) {
        if (buffered.length < 8) return;
        const length = buffered.readInt32BE(0);
        if (length < 8 || length > MAX_STARTUP_BYTES) return void socket.destroy();
        if (buffered.length < length) return;
        const code = buffered.readInt32BE(4);
        buffered = buffered.subarray(length);
        if (code === SSL_REQUEST || code === GSSENC_REQUEST) {
          socket.write("N");
        } else if (code === PROTOCOL_3) {
          started = true;
          socket.write(startupReply(parameters));
        } else {
          if (code !== CANCEL_REQUEST) socket.write(fatal("unsupported protocol"));
          socket.end();
          return;
        }
        continue;
      }
      if (buffered.length < 5) return;
      const length = buffered.readInt32BE(1) + 1;
      if (length < 5) return void socket.destroy(); // not the protocol: a message's length counts itself
      if (buffered.length < length) return;
      const frame = buffered.subarray(0, length);
      buffered = buffered.subarray(length);
      const type = String.fromCharCode(frame[0]!);
      if (type === "X") {
        socket.end();
        return;
      }
      batch.push(frame);
      // Sent to the database when the client waits for an answer: Sync, a simple Query, Flush.
      if (type === "S" || type === "Q" || type === "H") {
        enqueue(Buffer.concat(batch));
        batch = [];
      }
    }
  });
  socket.on("close", end);
  socket.on("error", () => socket.destroy());
}
