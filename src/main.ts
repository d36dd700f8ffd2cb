// The process's life: start serving (compose.ts), stop gracefully on SIGINT or SIGTERM, and exit with a code
// that says how it ended.
import { ConfigError } from "./config.js";
import { start } from "./compose.js";
import { DataDirLockedError } from "./db/data-dir-lock.js";
import { DatabaseOpenError } from "./db/open-errors.js";
import { log } from "./kernel/log.js";

async function main(): Promise<void> {
  const running = await start();
  // A graceful stop, then exit 0; a stop that fails exits 1. A second signal while stopping changes nothing.
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    try {
      await running.stop(signal);
    } catch (err) {
      log.error("stopping failed", { err });
      process.exit(1);
    }
    process.exit(0);
  };
  process.on("SIGINT", () => void stop("SIGINT"));
  process.on("SIGTERM", () => void stop("SIGTERM"));
  // Once a signal stops the server gracefully: whoever reads the token may stop it at once.
  await running.greet();
}

// A failure the user can act on is one line saying what to do (which setting, which process); anything else
// is a bug, logged with its stack.
main().catch((err: unknown) => {
  if (err instanceof ConfigError) {
    log.error(`configuration error: ${err.message}`);
  } else if (err instanceof DataDirLockedError || err instanceof DatabaseOpenError) {
    log.error(`failed to start: ${err.message}`);
  } else {
    log.error("failed to start", { err });
  }
  process.exit(1);
});
