// npm run bootstrap -- --issuer <url> --subject <sub> [--organization <name>] [--name <identity name>]
//
// Creates a root organization owned by the identity that tokens with this issuer and subject assume, on the
// configured database (DATABASE_URL, or the embedded one under DATA_DIR). Idempotent: run again with the
// same arguments, it prints what exists. Prints the uids as JSON on stdout.
import { parseArgs } from "node:util";
import { loadConfig } from "../config.js";
import { runWhenMain } from "./run.js";
import { openDatabase } from "../db/client.js";
import { bootstrap } from "../iam/bootstrap.js";
import { setLogLevel } from "../kernel/log.js";

const usage = "usage: npm run bootstrap -- --issuer <https url> --subject <subject> [--organization <name>] [--name <identity name>]";

export async function runBootstrap(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        issuer: { type: "string" },
        subject: { type: "string" },
        organization: { type: "string", default: "default" },
        name: { type: "string", default: "owner" },
      },
    }));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${usage}\n`);
    return 2;
  }
  const { issuer, subject, organization, name } = values;
  if (!issuer || !subject) {
    process.stderr.write(`--issuer and --subject are required\n${usage}\n`);
    return 2;
  }
  try {
    const url = new URL(issuer);
    if (url.protocol !== "https:" && url.protocol !== "http:") throw new Error();
  } catch {
    process.stderr.write(`--issuer must be an http(s) URL\n${usage}\n`);
    return 2;
  }
  const config = loadConfig();
  setLogLevel("warn");
  const database = await openDatabase(config);
  try {
    const result = await bootstrap(database.db, { issuer, subject, organization: organization!, identityName: name! });
    process.stdout.write(JSON.stringify(result, null, 2) + "\n");
    return 0;
  } finally {
    await database.close();
  }
}

runWhenMain(import.meta.url, "bootstrap", runBootstrap);
