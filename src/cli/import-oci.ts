// npm run import-oci -- --repo <repo uid> <layout dir>
//
// Imports an OCI image layout directory (oci-layout, index.json, blobs/sha256/...) into an existing repo of
// the configured database (DATABASE_URL, or the embedded one under DATA_DIR): records every manifest and
// creates a tag for each org.opencontainers.image.ref.name annotation of index.json. Every blob is checked
// against its digest first; a corrupted layout writes nothing. Progress goes to stderr (one updating line on
// a terminal, a plain line every few seconds otherwise); the summary is printed as JSON on stdout.
// Exit codes: 0 imported, 1 failed (invalid or corrupted layout, unknown repo, database error), 2 usage.
import { parseArgs } from "node:util";
import { loadConfig } from "../config.js";
import { runWhenMain } from "./run.js";
import { openDatabase } from "../db/client.js";
import { setLogLevel } from "../kernel/log.js";
import { isValidUid } from "../kernel/uidp.js";
import { importOciLayout, OciImportError, type ImportProgress } from "../registry/oci-import.js";

const USAGE = "usage: npm run import-oci -- --repo <repo uid> <OCI layout directory>";

function bytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${v.toFixed(u === 0 ? 0 : 1)} ${units[u]}`;
}

/** One line describing where the import is. */
export function progressLine(p: Readonly<ImportProgress>, elapsedSeconds: number): string {
  const rate = elapsedSeconds > 0 ? p.bytesVerified / elapsedSeconds : 0;
  const verified = `${p.blobsVerified} blobs, ${bytes(p.bytesVerified)}${p.bytesTotal ? ` of ${bytes(p.bytesTotal)}` : ""} verified (${bytes(rate)}/s)`;
  switch (p.phase) {
    case "scan":
      return `scanning: ${p.manifestsScanned} manifests, ${verified}`;
    case "verify": {
      const pct = p.bytesTotal ? ` ${((100 * p.bytesVerified) / p.bytesTotal).toFixed(1)}%` : "";
      return `verifying:${pct} ${verified}`;
    }
    case "write":
      return `writing: ${p.manifestsWritten}/${p.manifestsTotal} manifests`;
    case "tags":
      return `tagging: ${p.tagsWritten}/${p.tagsTotal} tags`;
    case "done":
      return `done: ${p.manifestsTotal} manifests, ${p.tagsTotal} tags, ${verified} in ${elapsedSeconds.toFixed(1)}s`;
  }
}

/** A progress display on a stream: an updating line on a terminal, periodic plain lines otherwise. */
function progressDisplay(stream: NodeJS.WriteStream) {
  const started = performance.now();
  const tty = stream.isTTY === true;
  const interval = tty ? 100 : 5000;
  let last = 0;
  let lastPhase = "";
  let shown = false;
  return {
    update(p: Readonly<ImportProgress>) {
      const now = performance.now();
      const phaseChanged = p.phase !== lastPhase;
      if (!phaseChanged && now - last < interval && p.phase !== "done") return;
      last = now;
      lastPhase = p.phase;
      const line = progressLine(p, (now - started) / 1000);
      if (tty) {
        const width = stream.columns ? stream.columns - 1 : 200;
        stream.write(`\r\x1b[2K${line.slice(0, width)}`);
        shown = true;
        if (p.phase === "done") {
          stream.write("\n");
          shown = false;
        }
      } else {
        stream.write(line + "\n");
      }
    },
    /** Ends the updating line before anything else is written. */
    end() {
      if (shown) stream.write("\n");
      shown = false;
    },
  };
}

export async function main(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let values;
  let positionals;
  try {
    ({ values, positionals } = parseArgs({ args: [...argv], allowPositionals: true, options: { repo: { type: "string" } } }));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${USAGE}\n`);
    return 2;
  }
  const repoUid = values.repo;
  if (!repoUid || positionals.length !== 1) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  if (!isValidUid(repoUid) || !repoUid.includes("/")) {
    process.stderr.write(`--repo must be a repo uid (<group uid>/<id>), got ${JSON.stringify(repoUid)}\n${USAGE}\n`);
    return 2;
  }
  const config = loadConfig(env);
  setLogLevel("warn");
  const database = await openDatabase(config);
  const display = progressDisplay(process.stderr);
  try {
    const result = await importOciLayout(database.db, { repoUid, dir: positionals[0]!, onProgress: (p) => display.update(p) });
    display.end();
    for (const w of result.warnings) process.stderr.write(`warning: ${w}\n`);
    for (const s of result.skipped) process.stderr.write(`skipped ${s.digest}: ${s.reason}\n`);
    process.stdout.write(JSON.stringify(result, null, 2) + "\n");
    return 0;
  } catch (err) {
    display.end();
    if (err instanceof OciImportError) {
      process.stderr.write(`import failed: ${err.message}\n`);
      return 1;
    }
    throw err;
  } finally {
    await database.close();
  }
}

runWhenMain(import.meta.url, "import", main);
