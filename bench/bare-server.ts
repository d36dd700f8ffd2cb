// The baseline: bare node:http and node:http2 servers answering Ping's JSON (and its gRPC framing) with no
// framework, no router and no database. Prints its two ports as JSON on stdout.
import http from "node:http";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";

const body = JSON.stringify({ response: "pong" });
// gRPC frame of PingResponse{response: "pong"}: field 1, length 4, "pong"
const message = Buffer.from([0x0a, 0x04, ...Buffer.from("pong")]);
const frame = Buffer.concat([Buffer.from([0, 0, 0, 0, message.length]), message]);

const h1 = http.createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
  req.resume();
  req.on("end", () => res.writeHead(200, { "content-type": "application/json" }).end(body));
});
const h2 = http2.createServer();
h2.on("stream", (stream) => {
  stream.resume();
  stream.on("end", () => {
    stream.respond({ ":status": 200, "content-type": "application/grpc+proto" }, { waitForTrailers: true });
    stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
    stream.end(frame);
  });
});

h1.listen(0, "127.0.0.1", () => {
  h2.listen(0, "127.0.0.1", () => {
    const ports = { http1: (h1.address() as AddressInfo).port, http2: (h2.address() as AddressInfo).port };
    process.stdout.write(JSON.stringify(ports) + "\n");
  });
});
