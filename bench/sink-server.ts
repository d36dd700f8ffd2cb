// The events benchmark's sink: a bare node:http server on 127.0.0.1 that answers every POST with 204 at
// once, counting requests and distinct ce-id values (a repeated id is a duplicate delivery). It verifies
// nothing (no token, no digest), so it costs the same for the server's deliveries and for the baseline's
// plain POSTs. Prints {"port": N} on stdout when listening.
//   GET /stats   -> {"requests": N, "distinct": N}
//   POST /reset  -> forgets the counts
import http from "node:http";
import type { AddressInfo } from "node:net";

let requests = 0;
let ids = new Set<string>();

const server = http.createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
  if (req.url === "/stats") {
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ requests, distinct: ids.size }));
    return;
  }
  if (req.url === "/reset") {
    requests = 0;
    ids = new Set();
    res.writeHead(204).end();
    return;
  }
  requests++;
  const id = req.headers["ce-id"];
  if (typeof id === "string") ids.add(id);
  req.resume();
  req.on("end", () => res.writeHead(204).end());
});
server.listen(0, "127.0.0.1", () => process.stdout.write(JSON.stringify({ port: (server.address() as AddressInfo).port }) + "\n"));
