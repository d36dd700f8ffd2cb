// The baselines: bare node:http and node:http2 servers answering Ping's JSON (and its gRPC framing) with no
// framework, no router and no database; and a plain connect-node adapter serving only Ping, to tell the
// framework's own cost from this server's. Prints the ports as JSON on stdout.
import http from "node:http";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { PingService } from "../gen/chainguard/platform/ping/v2/ping_pb.js";

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

const connect = http2.createServer(
  connectNodeAdapter({ routes: (router) => router.service(PingService, { ping: () => ({ response: "pong" }) }) }),
);
const connectH1 = http.createServer(
  connectNodeAdapter({ routes: (router) => router.service(PingService, { ping: () => ({ response: "pong" }) }) }),
);

const listen = (server: http.Server | http2.Http2Server) =>
  new Promise<number>((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as AddressInfo).port)));

const ports = {
  http1: await listen(h1),
  http2: await listen(h2),
  connectHttp1: await listen(connectH1),
  connectHttp2: await listen(connect),
};
process.stdout.write(JSON.stringify(ports) + "\n");
