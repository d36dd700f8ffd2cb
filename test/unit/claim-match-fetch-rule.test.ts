// Which issuer and JWKS URLs the external verifier may fetch: https always; plain http only to loopback
// hosts (127.0.0.0/8, ::1, localhost) and only when the development setting allows it.
import { describe, expect, it } from "vitest";
import { checkIssuerUrl, discoveryUrlOf } from "../../src/kernel/auth/external.js";
import { checkFetchUrl, isLoopbackHost } from "../../src/kernel/outbound.js";

describe("isLoopbackHost", () => {
  const table: Array<[string, boolean]> = [
    ["127.0.0.1", true],
    ["127.255.255.254", true],
    ["localhost", true],
    ["LOCALHOST", true],
    ["[::1]", true],
    ["128.0.0.1", false],
    ["10.0.0.1", false],
    ["169.254.169.254", false],
    ["127.0.0.1.nip.io", false],
    ["localhost.evil.example", false],
    ["foo.localhost", false],
    ["[::ffff:7f00:1]", false],
    ["0.0.0.0", false],
  ];
  it.each(table)("%s -> %s", (host, want) => expect(isLoopbackHost(host)).toBe(want));
});

describe("checkFetchUrl", () => {
  const table: Array<[url: string, insecureLoopback: boolean, allowed: boolean]> = [
    ["https://issuer.example", false, true],
    ["https://issuer.example/tenant/", false, true],
    ["https://127.0.0.1:8443", false, true],
    ["http://issuer.example", true, false],
    ["http://issuer.example", false, false],
    ["http://127.0.0.1:5556", true, true],
    ["http://127.0.0.1:5556", false, false],
    ["http://127.1:5556", true, true], // normalized by the URL parser to 127.0.0.1
    ["http://0x7f000001/", true, true], // likewise
    ["http://localhost:5556/dex", true, true],
    ["http://[::1]:5556", true, true],
    ["http://169.254.169.254/latest", true, false],
    ["http://127.0.0.1.nip.io", true, false],
    ["ftp://issuer.example", true, false],
    ["file:///etc/passwd", true, false],
    ["https://user:pass@issuer.example", false, false],
    ["not a url", true, false],
    ["/relative", true, false],
  ];
  it.each(table)("%s (insecure loopback %s) -> %s", (url, insecure, allowed) => {
    expect("url" in checkFetchUrl(url, insecure)).toBe(allowed);
  });
});

describe("checkIssuerUrl", () => {
  it("refuses a query or fragment", () => {
    expect("url" in checkIssuerUrl("https://issuer.example", false)).toBe(true);
    expect("url" in checkIssuerUrl("https://issuer.example?x=1", false)).toBe(false);
    expect("url" in checkIssuerUrl("https://issuer.example#x", false)).toBe(false);
    expect("url" in checkIssuerUrl("https://issuer.example#", false)).toBe(false);
  });
  it("builds the discovery URL without a double slash", () => {
    expect(discoveryUrlOf("https://issuer.example")).toBe("https://issuer.example/.well-known/openid-configuration");
    expect(discoveryUrlOf("https://issuer.example/tenant/")).toBe("https://issuer.example/tenant/.well-known/openid-configuration");
  });
});
