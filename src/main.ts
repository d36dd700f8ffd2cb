// The one wiring point: config -> database -> services -> server.
import { ConfigError, loadConfig } from "./config.js";
import { openDatabase } from "./db/client.js";
import { ensureSecret } from "./db/secrets.js";
import { log, setLogLevel } from "./kernel/log.js";
import { createApp } from "./server/app.js";
import { listen } from "./server/listener.js";

async function main(): Promise<void> {
  const config = loadConfig();
  setLogLevel(config.logLevel);
  const database = await openDatabase(config);
  const pageTokenSecret = await ensureSecret(database.db, "page-token");
  const app = createApp({ database, serviceDomain: config.serviceDomain, pageTokenSecret });
  const listener = await listen(app.handler, { port: config.port, host: config.host, tls: config.tls });

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info("stopping", { signal });
    app.drain();
    await listener.close();
    await database.close();
    process.exit(0);
  };
  process.on("SIGINT", () => void stop("SIGINT"));
  process.on("SIGTERM", () => void stop("SIGTERM"));
}

main().catch((err: unknown) => {
  if (err instanceof ConfigError) {
    log.error(`configuration error: ${err.message}`);
  } else {
    log.error("failed to start", { err });
  }
  process.exit(1);
});
