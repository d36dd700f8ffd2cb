// The cluster's S3-compatible storage (`npm run cluster`): @20minutes/s3rver as a process of its own, keeping
// its objects in a directory, with one bucket; the three API servers keep the registry's blobs in it.
// Usage: tsx scripts/cluster/s3.ts <directory> <port> <bucket>
import S3rver from "@20minutes/s3rver";

const [directory, port, bucket] = process.argv.slice(2);
if (!directory || !port || !bucket) {
  process.stderr.write("usage: tsx scripts/cluster/s3.ts <directory> <port> <bucket>\n");
  process.exit(2);
}
// The SDK's signature on list requests differs from s3rver's own computation (test/support/s3-server.ts).
const server = new S3rver({ address: "127.0.0.1", port: Number(port), directory, silent: true, allowMismatchedSignatures: true, configureBuckets: [{ name: bucket }] });
await server.run();
process.stdout.write(`s3rver on 127.0.0.1:${port}, bucket ${bucket}, objects in ${directory}\n`);
const stop = () => void server.close().then(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
