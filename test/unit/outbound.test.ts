// The address checks of kernel/outbound.ts: which addresses count as public, the addresses of a name (all
// public, or the whole name refused), and the connection-time `lookup` in both shapes Node asks for (one
// address, or all of them), also as Node's own net.connect calls it.
import type { LookupAddress } from "node:dns";
import net from "node:net";
import { describe, expect, it } from "vitest";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { ForbiddenAddressError, nonPublicRange, outboundFetch, publicAddressesOf, publicOnlyFetch, publicOnlyLookup, type Resolver } from "../../src/kernel/outbound.js";

/** A resolver answering from a table, recording what it was asked; unknown names fail as DNS does. */
function fakeResolver(table: Record<string, Array<[string, 4 | 6]>>) {
  const asked: string[] = [];
  const resolve: Resolver = async (hostname) => {
    asked.push(hostname);
    const entry = table[hostname];
    if (!entry) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
    return entry.map(([address, family]) => ({ address, family }));
  };
  return { resolve, asked };
}

const names = fakeResolver({
  "public.test": [["93.184.215.14", 4]],
  "dual.test": [
    ["2606:4700::1111", 6],
    ["93.184.215.14", 4],
  ],
  "v6only.test": [["2606:4700::1111", 6]],
  "private.test": [["10.0.0.1", 4]],
  "metadata.test": [["169.254.169.254", 4]],
  "mixed.test": [
    ["93.184.215.14", 4],
    ["192.168.1.20", 4],
  ],
  "loopback6.test": [["::1", 6]],
  "empty.test": [],
});

describe("nonPublicRange", () => {
  it.each(["93.184.215.14", "8.8.8.8", "2606:4700::1111", "::ffff:93.184.215.14", "64:ff9b::808:808", "[64:ff9b::5db8:d70e]"])("%s is public", (address) => {
    expect(nonPublicRange(address)).toBeUndefined();
  });

  it.each([
    ["127.0.0.1", "loopback"],
    ["127.255.0.9", "loopback"],
    ["::1", "loopback"],
    ["[::1]", "loopback"],
    ["10.0.0.1", "private"],
    ["172.16.0.1", "private"],
    ["192.168.1.1", "private"],
    ["169.254.169.254", "linkLocal"],
    ["fe80::1", "linkLocal"],
    ["fd00:ec2::254", "uniqueLocal"],
    ["100.64.0.1", "carrierGradeNat"],
    ["0.0.0.0", "unspecified"],
    ["::", "unspecified"],
    ["224.0.0.1", "multicast"],
    ["255.255.255.255", "broadcast"],
    ["192.0.2.1", "reserved"],
    ["2001:db8::1", "reserved"],
    // IPv4-mapped IPv6 is judged as the IPv4 address it carries.
    ["::ffff:127.0.0.1", "loopback"],
    ["::ffff:10.0.0.1", "private"],
    ["::ffff:169.254.169.254", "linkLocal"],
    ["::ffff:a9fe:a9fe", "linkLocal"],
    // IPv4-compatible (::/96, deprecated) is refused whatever it carries: ipaddr.js calls it unicast.
    ["::a9fe:a9fe", "ipv4Compatible"],
    ["[::7f00:1]", "ipv4Compatible"],
    ["::127.0.0.1", "ipv4Compatible"],
    ["::10.0.0.1", "ipv4Compatible"],
    ["::8.8.8.8", "ipv4Compatible"],
    // NAT64's well-known prefix is judged as the IPv4 address it carries; its local-use prefix is refused.
    ["64:ff9b::a9fe:a9fe", "linkLocal (NAT64 of 169.254.169.254)"],
    ["64:ff9b::127.0.0.1", "loopback (NAT64 of 127.0.0.1)"],
    ["64:ff9b::a00:1", "private (NAT64 of 10.0.0.1)"],
    ["64:ff9b:1::a9fe:a9fe", "rfc6052"],
    // 6to4, Teredo and SIIT carry an IPv4 address too: refused.
    ["2002:a9fe:a9fe::1", "6to4"],
    ["2002:808:808::1", "6to4"],
    ["2001:0:4136:e378:8000:63bf:3fff:fdd2", "teredo"],
    ["::ffff:0:a9fe:a9fe", "rfc6145"],
  ])("%s is %s", (address, range) => {
    expect(nonPublicRange(address)).toBe(range);
  });

  it.each(["", "example.com", "1.2.3.4.5", "::g"])("%j is not an address: invalid", (address) => {
    expect(nonPublicRange(address)).toBe("invalid");
  });
});

describe("publicAddressesOf", () => {
  it("an IP literal is its own address, never resolved; an IPv6 literal may be bracketed", async () => {
    const r = fakeResolver({});
    expect(await publicAddressesOf("93.184.215.14", r.resolve)).toEqual([{ address: "93.184.215.14", family: 4 }]);
    expect(await publicAddressesOf("[2606:4700::1111]", r.resolve)).toEqual([{ address: "2606:4700::1111", family: 6 }]);
    expect(r.asked).toEqual([]);
  });

  it("a name with public addresses only: all of them", async () => {
    expect(await publicAddressesOf("public.test", names.resolve)).toEqual([{ address: "93.184.215.14", family: 4 }]);
    expect((await publicAddressesOf("dual.test", names.resolve)).map((a) => a.address)).toEqual(["2606:4700::1111", "93.184.215.14"]);
  });

  it.each([
    ["127.0.0.1", "127.0.0.1", "loopback", "127.0.0.1 is a loopback address"],
    ["[::1]", "::1", "loopback", "::1 is a loopback address"],
    ["10.0.0.1", "10.0.0.1", "private", "10.0.0.1 is a private address"],
    ["169.254.169.254", "169.254.169.254", "linkLocal", "169.254.169.254 is a linkLocal address"],
    ["private.test", "10.0.0.1", "private", "private.test resolves to 10.0.0.1, a private address"],
    ["metadata.test", "169.254.169.254", "linkLocal", "metadata.test resolves to 169.254.169.254, a linkLocal address"],
    ["loopback6.test", "::1", "loopback", "loopback6.test resolves to ::1, a loopback address"],
    // One private address refuses the whole name: a connection may go to any of them.
    ["mixed.test", "192.168.1.20", "private", "mixed.test resolves to 192.168.1.20, a private address"],
  ])("%s: refused (ForbiddenAddressError naming %s, %s)", async (host, address, range, message) => {
    const err = await publicAddressesOf(host, names.resolve).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ForbiddenAddressError);
    expect(err).toMatchObject({ code: "EFORBIDDENADDRESS", address, range, message });
  });

  it("a name without addresses: ENOTFOUND; the resolver's own failure passes through", async () => {
    await expect(publicAddressesOf("empty.test", names.resolve)).rejects.toMatchObject({ code: "ENOTFOUND", message: "empty.test has no address" });
    await expect(publicAddressesOf("unknown.test", names.resolve)).rejects.toMatchObject({ code: "ENOTFOUND", message: "getaddrinfo ENOTFOUND unknown.test" });
  });
});

/** Calls the lookup as Node does, with the callback's arguments as the result. */
function lookup(hostname: string, options: { all?: boolean; family?: number | string }) {
  return new Promise<{ err: NodeJS.ErrnoException | null; address: string | LookupAddress[]; family?: number | undefined }>((resolve) =>
    publicOnlyLookup(names.resolve)(hostname, options, (err, address, family) => resolve({ err, address, family })),
  );
}

describe("publicOnlyLookup", () => {
  it("all: every address, as a list", async () => {
    expect(await lookup("dual.test", { all: true })).toEqual({
      err: null,
      address: [
        { address: "2606:4700::1111", family: 6 },
        { address: "93.184.215.14", family: 4 },
      ],
      family: undefined,
    });
  });

  it("single: the first address and its family", async () => {
    expect(await lookup("dual.test", {})).toEqual({ err: null, address: "2606:4700::1111", family: 6 });
    expect(await lookup("93.184.215.14", { all: false })).toEqual({ err: null, address: "93.184.215.14", family: 4 });
  });

  it("a family asked for: only addresses of that family, in either shape", async () => {
    expect(await lookup("dual.test", { family: 4 })).toEqual({ err: null, address: "93.184.215.14", family: 4 });
    expect(await lookup("dual.test", { all: true, family: 6 })).toMatchObject({ err: null, address: [{ address: "2606:4700::1111", family: 6 }] });
    // family 0 (or a string, as older callers pass) means any.
    expect(await lookup("dual.test", { all: true, family: 0 })).toMatchObject({ err: null, address: [{ family: 6 }, { family: 4 }] });
  });

  it("no address of the family asked for: ENOTFOUND, with the empty value of the shape", async () => {
    const single = await lookup("v6only.test", { family: 4 });
    expect(single.err).toMatchObject({ code: "ENOTFOUND", message: "v6only.test has no IPv4 address" });
    const all = await lookup("v6only.test", { all: true, family: 4 });
    expect(all.err).toMatchObject({ code: "ENOTFOUND" });
    expect(all.address).toEqual([]);
  });

  it("a name with a non-public address: EFORBIDDENADDRESS, with the empty value of the shape", async () => {
    const single = await lookup("metadata.test", {});
    expect(single.err).toBeInstanceOf(ForbiddenAddressError);
    expect(single.address).toBe("");
    const all = await lookup("mixed.test", { all: true });
    expect(all.err).toMatchObject({ code: "EFORBIDDENADDRESS", address: "192.168.1.20" });
    expect(all.address).toEqual([]);
  });

  it("a resolver failure is passed on", async () => {
    expect((await lookup("unknown.test", { all: true })).err).toMatchObject({ code: "ENOTFOUND" });
  });

  // Node's own callers: net.connect asks for all addresses when it may try several (autoSelectFamily), and
  // for one otherwise. Either way a refused name is never dialled: the connection fails with the lookup's error.
  it.each([true, false])("net.connect (autoSelectFamily %s) to a name resolving to loopback fails before dialling", async (autoSelectFamily) => {
    const server = net.createServer((s) => s.destroy());
    let accepted = 0;
    server.on("connection", () => accepted++);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as net.AddressInfo;
    const r = fakeResolver({ "rebound.test": [["127.0.0.1", 4]] });
    try {
      const err = await new Promise<NodeJS.ErrnoException>((resolve, reject) => {
        const socket = net.connect({ host: "rebound.test", port, lookup: publicOnlyLookup(r.resolve), autoSelectFamily });
        socket.on("connect", () => {
          socket.destroy();
          reject(new Error("connected to a loopback address"));
        });
        socket.on("error", resolve);
      });
      expect(err).toMatchObject({ code: "EFORBIDDENADDRESS", address: "127.0.0.1", range: "loopback" });
      expect(r.asked).toEqual(["rebound.test"]);
      expect(accepted).toBe(0);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe("outbound fetches", () => {
  async function withServer(handler: http.RequestListener, run: (base: string) => Promise<void>): Promise<void> {
    const server = http.createServer(handler);
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    try {
      await run(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  }

  it("answer like fetch: status, headers, body; a redirect is not followed (an error when asked)", async () => {
    await withServer(
      (req, res) => {
        if (req.url === "/moved") return void res.writeHead(302, { location: "/elsewhere" }).end();
        res.writeHead(200, { "content-type": "application/json", "x-seen-accept": String(req.headers.accept) }).end('{"ok":true}');
      },
      async (base) => {
        const f = outboundFetch();
        const res = await f(`${base}/doc`, { headers: { accept: "application/json" } });
        expect(res.status).toBe(200);
        expect(res.headers.get("x-seen-accept")).toBe("application/json");
        expect(await res.json()).toEqual({ ok: true });
        expect((await f(`${base}/moved`, { redirect: "manual" })).status).toBe(302);
        await expect(f(`${base}/moved`, { redirect: "error" })).rejects.toThrow(/redirect/);
      },
    );
  });

  it("refuse a non-public address, by name (DNS rebinding) or literal, before anything is sent", async () => {
    let requests = 0;
    await withServer(
      (_req, res) => {
        requests++;
        res.end("{}");
      },
      async (base) => {
        const port = new URL(base).port;
        const rebinding: Resolver = async () => [{ address: "127.0.0.1", family: 4 }];
        const f = publicOnlyFetch(rebinding);
        await expect(f(`http://issuer.example:${port}/.well-known/openid-configuration`)).rejects.toMatchObject({ code: "EFORBIDDENADDRESS", address: "127.0.0.1" });
        await expect(f(`${base}/x`)).rejects.toBeInstanceOf(ForbiddenAddressError);
        expect(requests).toBe(0);
      },
    );
  });
});
