import { afterAll, beforeAll, expect } from "vitest";
import { PingService } from "../../gen/chainguard/platform/ping/v2/ping_pb.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { contractCase, runContractCases } from "./harness.js";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server?.close();
});

runContractCases("Ping", () => server.baseUrl, [
  contractCase({
    name: "answers without credentials",
    method: PingService.method.ping,
    response: (res) => expect(res.response).toBe("pong"),
  }),
  contractCase({
    name: "ignores a bearer token it does not need",
    method: PingService.method.ping,
    headers: { authorization: "Bearer not-a-real-token" },
    response: (res) => expect(res.response).toBe("pong"),
  }),
]);
