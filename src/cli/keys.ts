// Signing-key administration: `npm run keys:rotate` (tsx src/cli/keys.ts rotate).
//
// Opens the configured database (DATABASE_URL, or the embedded one under DATA_DIR), generates a new signing
// key and retires the current one, and prints the result as JSON. Retired keys keep verifying, and stay in
// the published JWKS, until every token they signed has expired. Running servers pick the new key up at once:
// the database notifies them of every change to the keys (drizzle/0008); without that notification they
// reload keys every minute, and when they meet a token with an unknown kid.
import { loadConfig } from "../config.js";
import { defineCommand, runWhenMain } from "./run.js";
import { openDatabase, type Database } from "../db/client.js";
import { createKeyStore } from "../kernel/auth/keys.js";
import { log, setLogLevel } from "../kernel/log.js";

interface RotateResult {
  /** The kid new tokens are signed with. */
  kid: string;
  /** Every kid still published (and verifying), newest first. */
  published: string[];
}

/** Rotates the signing key of the database. */
async function rotateSigningKey(database: Database): Promise<RotateResult> {
  const keys = await createKeyStore(database.db);
  const kid = await keys.rotate();
  const { keys: jwks } = await keys.publicJwks();
  return { kid, published: jwks.map((k) => k.kid ?? "") };
}

const main = defineCommand(
  {
    invocation: "npm run keys:rotate",
    summary: [
      "Rotates this server's signing key on the configured database (DATABASE_URL, or the embedded one under",
      "DATA_DIR): new tokens are signed with a new key; the retired one keeps verifying until its tokens expire.",
      "Prints the new kid and the published kids as JSON on stdout.",
    ].join("\n"),
    options: {},
    leading: ["rotate"],
  },
  async (_args, env) => {
    const config = loadConfig(env);
    // Logs go to stderr; stdout carries only the JSON result.
    setLogLevel(config.logLevel);
    const database = await openDatabase({ ...config, share: "join" });
    try {
      const result = await rotateSigningKey(database);
      log.info("signing key rotated", { kid: result.kid });
      process.stdout.write(JSON.stringify(result) + "\n");
      return 0;
    } finally {
      await database.close();
    }
  },
);

runWhenMain(import.meta.url, "key rotation", main);
