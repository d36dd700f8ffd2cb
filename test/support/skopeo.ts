// Driving Debian's `skopeo` (the registry's interoperability test and benchmark) and running the CNCF
// Distribution registry (Debian's `docker-registry`, 2.8) as a baseline. skopeo runs with its own temporary
// directory, an auth file of its own (never the user's), no signature policy and plain HTTP to the loopback
// registry (`--*-tls-verify=false`).
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const SKOPEO = "/usr/bin/skopeo";
export const DISTRIBUTION = "/usr/bin/docker-registry";

export const skopeoInstalled = (): boolean => existsSync(SKOPEO);
export const distributionInstalled = (): boolean => existsSync(DISTRIBUTION);

export class SkopeoError extends Error {
  constructor(
    readonly args: readonly string[],
    readonly code: number | null,
    readonly stderr: string,
  ) {
    super(`skopeo ${args.join(" ")} exited with ${code}: ${stderr.trim().slice(-2000)}`);
  }
}

export interface Skopeo {
  /** The auth file `login` writes and every command reads. */
  authfile: string;
  /** Runs skopeo with the global options and `args`; resolves with stdout (rejects with SkopeoError). */
  run(args: readonly string[], opts?: { stdin?: string }): Promise<string>;
  /** `skopeo login` to `host` (host:port) with a user and a password (sent on stdin, never in argv). */
  login(host: string, username: string, password: string): Promise<void>;
  /** `skopeo copy` with the TLS checks off on both sides. */
  copy(src: string, dest: string, extra?: readonly string[]): Promise<void>;
  inspect(ref: string, opts?: { raw?: boolean }): Promise<unknown>;
  listTags(ref: string): Promise<string[]>;
  delete(ref: string): Promise<void>;
  /** Forgets where blobs were seen, so the next push uploads every blob rather than mounting it. */
  forgetBlobLocations(): void;
  close(): void;
}

export function skopeo(): Skopeo {
  const home = mkdtempSync(join(tmpdir(), "skopeo-"));
  const tmp = join(home, "tmp");
  mkdirSync(tmp);
  const authfile = join(home, "auth.json");
  writeFileSync(authfile, JSON.stringify({ auths: {} }));
  const global = ["--insecure-policy", "--tmpdir", tmp];
  // skopeo remembers where it has seen each blob (a "blob info cache") and then mounts or skips instead of
  // uploading; run as root it keeps that cache in /var/lib/containers, shared by every run on the machine. As
  // a non-root user (the variable containers/image reads for that) it keeps it under XDG_DATA_HOME: here.
  const data = join(home, "data");
  const env = {
    ...process.env,
    HOME: home,
    XDG_RUNTIME_DIR: home,
    XDG_CONFIG_HOME: join(home, ".config"),
    XDG_DATA_HOME: data,
    _CONTAINERS_ROOTLESS_UID: String(process.getuid?.() || 1000),
    REGISTRY_AUTH_FILE: authfile,
  };
  const run = (args: readonly string[], opts: { stdin?: string } = {}) =>
    new Promise<string>((resolve, reject) => {
      const child = execFile(SKOPEO, [...global, ...args], { env, maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
        if (err) reject(new SkopeoError(args, typeof err.code === "number" ? err.code : null, String(stderr)));
        else resolve(String(stdout));
      });
      child.stdin?.end(opts.stdin ?? "");
    });
  return {
    authfile,
    run,
    async login(host, username, password) {
      await run(["login", "--authfile", authfile, "--tls-verify=false", "--username", username, "--password-stdin", host], { stdin: password });
    },
    async copy(src, dest, extra = []) {
      await run(["copy", "--quiet", "--authfile", authfile, "--src-tls-verify=false", "--dest-tls-verify=false", ...extra, src, dest]);
    },
    async inspect(ref, opts = {}) {
      const out = await run(["inspect", "--authfile", authfile, "--tls-verify=false", ...(opts.raw ? ["--raw"] : []), ref]);
      return JSON.parse(out) as unknown;
    },
    async listTags(ref) {
      const out = await run(["list-tags", "--authfile", authfile, "--tls-verify=false", ref]);
      return (JSON.parse(out) as { Tags: string[] }).Tags;
    },
    async delete(ref) {
      await run(["delete", "--authfile", authfile, "--tls-verify=false", ref]);
    },
    forgetBlobLocations() {
      rmSync(join(data, "containers", "cache"), { recursive: true, force: true });
    },
    close() {
      rmSync(home, { recursive: true, force: true });
    },
  };
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

export interface Distribution {
  /** host:port, loopback. */
  host: string;
  pid: number;
  process: ChildProcess;
  /** Its storage root. */
  root: string;
  stop(): Promise<void>;
}

/**
 * The Distribution registry on a loopback port with a generated configuration: filesystem storage in a
 * temporary directory, deletes enabled, the in-memory blob descriptor cache (as Debian's default
 * configuration has it), no authentication, no TLS, logs at error level.
 */
export async function startDistribution(): Promise<Distribution> {
  const port = await freePort();
  const root = mkdtempSync(join(tmpdir(), "distribution-"));
  const config = join(root, "config.yml");
  mkdirSync(join(root, "storage"));
  writeFileSync(
    config,
    [
      "version: 0.1",
      "log:",
      "  level: error",
      "  accesslog:",
      "    disabled: true",
      "storage:",
      "  cache:",
      "    blobdescriptor: inmemory",
      "  filesystem:",
      `    rootdirectory: ${join(root, "storage")}`,
      "  delete:",
      "    enabled: true",
      "  maintenance:",
      "    uploadpurging:",
      "      enabled: false",
      "http:",
      `  addr: 127.0.0.1:${port}`,
      "",
    ].join("\n"),
  );
  const child = spawn(DISTRIBUTION, ["serve", config], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr!.setEncoding("utf8").on("data", (s: string) => (stderr = (stderr + s).slice(-4000)));
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`docker-registry exited with ${child.exitCode}: ${stderr}`);
    try {
      if ((await fetch(`http://127.0.0.1:${port}/v2/`)).ok) break;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error(`docker-registry did not start: ${stderr}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    host: `127.0.0.1:${port}`,
    pid: child.pid!,
    process: child,
    root,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise<void>((r) => child.once("exit", () => r()));
        child.kill("SIGTERM");
        await exited;
      }
      rmSync(root, { recursive: true, force: true });
    },
  };
}
