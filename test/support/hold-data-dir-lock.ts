// A process that takes the lock of a data directory (argv[2]), prints "locked", then either exits at once
// without releasing it by hand (argv[3] = "exit") or waits to be killed: what a server or command that ends,
// or is killed, leaves behind. Run with tsx by test/integration/data-dir-lock.test.ts.
import { lockDataDir } from "../../src/db/data-dir-lock.js";

const [dataDir, then] = process.argv.slice(2);
lockDataDir(dataDir!);
process.stdout.write("locked\n");
if (then === "exit") process.exit(0);
setInterval(() => {}, 60_000);
