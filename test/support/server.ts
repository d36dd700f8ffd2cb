// A real server on a real port (127.0.0.1, ephemeral), on a test database, for contract tests.
import { createApp, type AppDeps } from "../../src/server/app.js";
import { listen } from "../../src/server/listener.js";
import { setLogLevel } from "../../src/kernel/log.js";
import { ensureSecret } from "../../src/db/secrets.js";
import { openTestDatabase, type TestDatabase } from "./database.js";

export interface TestServer {
  baseUrl: string;
  port: number;
  database: TestDatabase;
  close(): Promise<void>;
}

export async function startTestServer(opts: Partial<Omit<AppDeps, "database" | "pageTokenSecret">> = {}): Promise<TestServer> {
  setLogLevel((process.env.LOG_LEVEL as "silent" | undefined) ?? "silent");
  const database = await openTestDatabase();
  const pageTokenSecret = await ensureSecret(database.db, "page-token");
  const app = createApp({ database, serviceDomain: "platform.test", pageTokenSecret, ...opts });
  const listener = await listen(app.handler, { port: 0, host: "127.0.0.1" });
  const port = listener.address.port;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    port,
    database,
    async close() {
      app.drain();
      await listener.close(1000);
      await database.dispose();
    },
  };
}
