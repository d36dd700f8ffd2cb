// Setup of every test file (vitest.config.ts setupFiles): every log line the file's servers write is
// captured at debug level (whatever LOG_LEVEL says for stderr), and when the file ends none may hold a
// secret the file used or a credential of recognisable shape (secrets.ts). So the whole suite, contract
// tables included, is a test that no secret, token or invite code is ever logged.
import { afterAll, beforeAll, expect } from "vitest";
import { addLogTap, setLogLevel, type LogLevel } from "../../src/kernel/log.js";
import { findLeaks, registeredSecrets } from "./secrets.js";

// A line the test process writes to stderr lands in the runner's output outside any test's captured output
// (a stray line in `npm test`): none is written unless LOG_LEVEL asks for them (LOG_LEVEL=debug npm test).
// Every line is still tapped below and checked; what a test asserts on, it reads through a tap or a child's pipe.
setLogLevel((process.env.LOG_LEVEL as LogLevel | undefined) ?? "silent");

const lines: string[] = [];
let untap: (() => void) | undefined;

beforeAll(() => {
  untap = addLogTap((line) => lines.push(line));
});

afterAll(() => {
  untap?.();
  const leaks = findLeaks(lines, registeredSecrets());
  expect(leaks, `secrets in ${leaks.length} of ${lines.length} log lines`).toEqual([]);
});
