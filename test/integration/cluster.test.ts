// The cluster of docs/deployment.md on this machine (scripts/cluster): a PostgreSQL primary and streaming
// replica, PgBouncer, three server processes, HAProxy, S3 storage, brought up on free ports, run under a
// short mixed gRPC and REST load while each server is restarted, the replica stopped and started and its
// replay paused; then taken down. The full run (60 s of load) is `npm run cluster -- test` (the same code).
// Runs once per CI run: with DATABASE_URL (the PostgreSQL pass), and only where the binaries are installed.
import { existsSync, mkdtempSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseMetrics, printReport, runClusterTest } from "../../scripts/cluster/load-test.js";
import { clusterUnavailable, down, up, type ClusterPorts } from "../../scripts/cluster/topology.js";

const unavailable = !process.env.DATABASE_URL ? "DATABASE_URL is not set (the cluster test runs in the PostgreSQL pass only)" : clusterUnavailable();
if (unavailable) console.info(`cluster test skipped: ${unavailable}`);

/** Ports free right now on 127.0.0.1 (each held until all are found, so they differ). */
async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from({ length: count }, () => new Promise<ReturnType<typeof createServer>>((resolve) => {
      const s = createServer();
      s.listen(0, "127.0.0.1", () => resolve(s));
    })),
  );
  const ports = servers.map((s) => (s.address() as AddressInfo).port);
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  return ports;
}

describe("the Prometheus figures the cluster test reads", () => {
  it("sums reads by target, takes the lowest replica_up and the highest lag, and counts delivered events", () => {
    const text = [
      "# HELP apiserver_db_reads_total Reads",
      'apiserver_db_reads_total{target="primary",replica=""} 7',
      'apiserver_db_reads_total{target="replica",replica="r1"} 30',
      'apiserver_db_reads_total{target="replica",replica="r2"} 12',
      'apiserver_db_replica_up{replica="r1"} 1',
      'apiserver_db_replica_up{replica="r2"} 0',
      'apiserver_db_replica_lag_seconds{replica="r1"} 0.25',
      'apiserver_db_replica_lag_seconds{replica="r2"} 3.5',
      'apiserver_events_deliveries_total{outcome="delivered"} 9',
      'apiserver_events_deliveries_total{outcome="retried"} 2',
    ].join("\n");
    expect(parseMetrics(text)).toEqual({ reads: { primary: 7, replica: 42 }, delivered: 9, up: 0, lag: 3.5 });
    expect(parseMetrics('apiserver_db_pool_size 10\napiserver_events_deliveries_total{outcome="delivered"} 1')).toEqual({ reads: { primary: 0, replica: 0 }, delivered: 1 });
  });
});

describe.skipIf(unavailable !== undefined)("the cluster on one machine under load and disruption", () => {
  let dir: string | undefined;
  afterAll(async () => {
    if (!dir) return;
    await down(dir, () => {});
    expect(existsSync(dir)).toBe(false);
  }, 120_000);

  it("serves every request, breaks no read-your-writes, and delivers each event once", async () => {
    dir = mkdtempSync(join(tmpdir(), "apiserver-cluster-"));
    const p = await freePorts(12);
    const ports: ClusterPorts = { primary: p[0]!, replica: p[1]!, pgbouncer: p[2]!, haproxy: p[3]!, haproxyStats: p[4]!, s3: p[5]!, servers: p.slice(6, 9), metrics: p.slice(9, 12) };
    const lines: string[] = [];
    const state = await up({ dir, ports, say: (l) => lines.push(l) });
    const report = await runClusterTest(state, { seconds: 20, clients: 4, say: (l) => lines.push(l) });
    printReport(report, (l) => lines.push(l));
    console.info(lines.join("\n"));
    expect(report.failures).toEqual([]);
    expect(report.ryw.violations).toEqual([]);
    expect(report.ryw.crossServer).toBeGreaterThan(0);
    expect(report.restarts.map((r) => r.server)).toEqual([1, 2, 3]);
    expect(report.events.missing).toBe(0);
    expect(report.events.duplicates).toBe(0);
    expect(report.events.expected).toBeGreaterThanOrEqual(report.events.mutations);
    // Meaningful once the servers report replica metrics (DATABASE_REPLICA_URLS): the replica served reads.
    if (report.replicaReads) expect(report.replicaReads.replica).toBeGreaterThan(0);
    expect(report.failed).toEqual([]);
  }, 600_000);
});
