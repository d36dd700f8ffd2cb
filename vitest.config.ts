import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Every file's log lines are captured and checked for the secrets it used (test/support/log-capture.ts).
    setupFiles: ["test/support/log-capture.ts"],
    // Servers and embedded databases are started once per file, and some tests start CLI processes (tsx
    // compiling on start): give them room on a busy 2-core machine, where one such test took over 30 s.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: "forks",
    maxWorkers: 2,
  },
});
