// Why PostgreSQL could not be opened, said for the person who set DATABASE_URL: one line naming the setting,
// what the database answered, and what to do. The server (main.ts) and every command (cli/run.ts) print it
// instead of a stack trace. The URL is never echoed whole: it may hold a password. Imports nothing: main.ts
// loads it before anything else.

/** PostgreSQL could not be opened for a reason the user can act on; the message says which and what to do. */
export class DatabaseOpenError extends Error {
  override name = "DatabaseOpenError";
}

/** host:port of a PostgreSQL URL (postgres.js' defaults: localhost, 5432), for messages. */
function where(url: URL): string {
  return `${url.hostname || "localhost"}:${url.port || "5432"}`;
}

/** The code of an error or of the first of its causes that has one (Node's socket errors, postgres.js', SQLSTATE). */
function codeOf(err: unknown): string | undefined {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string") return code;
  }
  return undefined;
}

/**
 * The DatabaseOpenError for a failure to connect to or log in to PostgreSQL at `databaseUrl`, or undefined
 * when the failure is something else (a failed migration: a bug to report with its stack).
 */
export function describeOpenFailure(err: unknown, databaseUrl: string): DatabaseOpenError | undefined {
  let url: URL;
  try {
    url = new URL(databaseUrl);
  } catch {
    return undefined;
  }
  const at = where(url);
  const user = decodeURIComponent(url.username) || "(the operating system user)";
  const database = decodeURIComponent(url.pathname.replace(/^\//, "")) || user;
  const fix = "correct DATABASE_URL, or unset it to use the embedded database";
  const said = (err as Error).message;
  const open = (text: string) => new DatabaseOpenError(`DATABASE_URL: ${text}`);
  const code = codeOf(err);
  switch (code) {
    case "28P01": // invalid_password
    case "28000": // invalid_authorization_specification (no such role, pg_hba.conf)
      return open(`PostgreSQL at ${at} refused user "${user}" (${said}): check the user and password in DATABASE_URL`);
    case "3D000": // invalid_catalog_name
      return open(`PostgreSQL at ${at} has no database "${database}": create it (createdb -h ${url.hostname || "localhost"} ${database}), or ${fix}`);
    case "57P03": // cannot_connect_now
      return open(`PostgreSQL at ${at} is starting up or shutting down: retry in a moment`);
    case "53300": // too_many_connections
      return open(`PostgreSQL at ${at} has no free connection (${said}): retry, or lower DATABASE_POOL_SIZE of the servers using it`);
    case "08P01": // protocol_violation: PgBouncer refusing a startup parameter (statement_timeout, jit)
      if (/unsupported startup parameter/i.test(said)) {
        return open(`${at} refused the connection's startup parameters (${said}): it is a pooler such as PgBouncer; in transaction mode set DATABASE_POOL_MODE=transaction (and DATABASE_LISTEN_URL)`);
      }
      return undefined;
    case "ECONNREFUSED":
      return open(`nothing accepts connections at ${at}: start PostgreSQL there, or ${fix}`);
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return open(`the host "${url.hostname}" is not known: ${fix}`);
    case "CONNECT_TIMEOUT":
    case "ETIMEDOUT":
    case "EHOSTUNREACH":
    case "ENETUNREACH":
      return open(`no answer from ${at}: check that PostgreSQL runs there and that the network lets this machine reach it, or ${fix}`);
    case "ECONNRESET":
    case "CONNECTION_CLOSED":
    case "CONNECTION_ENDED":
    case "CONNECTION_DESTROYED":
      return open(`${at} closed the connection at once (is it PostgreSQL? does it require TLS: add ?sslmode=require): ${fix}`);
  }
  return undefined;
}
