// npm run bootstrap -- --issuer <url> --subject <sub> [--organization <name>] [--name <identity name>]
//                        [--email <verified email>] [--verified]
//
// Creates a root organization owned by the identity that tokens with this issuer and subject assume, on the
// configured database (DATABASE_URL, or the embedded one under DATA_DIR). Idempotent: run again with the
// same arguments, it prints what exists. Prints the uids as JSON on stdout.
import { loadConfig } from "../config.js";
import { defineCommand, runWhenMain, UsageError } from "./run.js";
import { openDatabase } from "../db/client.js";
import { bootstrap } from "../iam/bootstrap.js";
import { setLogLevel } from "../kernel/log.js";

const runBootstrap = defineCommand(
  {
    invocation: "npm run bootstrap --",
    summary: [
      "Creates a root organization owned by the identity that tokens with this issuer and subject assume, on the",
      "configured database (DATABASE_URL, or the embedded one under DATA_DIR). Idempotent: run again with the same",
      "arguments, it prints what exists. Prints the uids as JSON on stdout.",
    ].join("\n"),
    options: {
      issuer: { type: "string", value: "<https url>", help: "the OIDC issuer of the owner's tokens", required: true },
      subject: { type: "string", value: "<subject>", help: "the subject (sub) of the owner's tokens", required: true },
      organization: { type: "string", value: "<name>", help: "the organization's name", default: "default" },
      name: { type: "string", value: "<identity name>", help: "the owner identity's name", default: "owner" },
      email: { type: "string", value: "<address>", help: "the owner's email, verified by you (recorded as the identity's verified email)" },
      verified: { type: "boolean", help: "mark the organization verified: LookupGroup shows it to people whose verified email's domain is its name" },
    },
  },
  async ({ values }, env) => {
    const { issuer, subject, organization, name, email, verified } = values;
    try {
      const url = new URL(issuer!);
      if (url.protocol !== "https:" && url.protocol !== "http:") throw new Error();
    } catch {
      throw new UsageError("--issuer must be an http(s) URL");
    }
    const config = loadConfig(env);
    setLogLevel("warn");
    const database = await openDatabase({ ...config, share: "join" });
    try {
      const result = await bootstrap(database.db, { issuer: issuer!, subject: subject!, organization, identityName: name, email, verified });
      process.stdout.write(JSON.stringify(result, null, 2) + "\n");
      return 0;
    } finally {
      await database.close();
    }
  },
);

runWhenMain(import.meta.url, "bootstrap", runBootstrap);
