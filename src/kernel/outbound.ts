// Where this server may send requests of its own (OIDC discovery of external issuers, event deliveries).
//
// Two checks. The URL: https, or plain http to a loopback host when a development setting allows it; no
// credentials. The addresses, for destinations a user names (event sinks): in production only public
// unicast addresses may be dialled, never loopback, private (RFC 1918, unique-local), link-local (where
// cloud metadata services live: 169.254.169.254, fd00:ec2::254), carrier-grade NAT, multicast, reserved or
// unspecified ones. The address check runs where the connection is made (the `lookup` of the HTTP agent,
// and before dialling an IP literal), on the addresses actually dialled, so a name that resolves to a public
// address when it is checked and to a private one when it is used (DNS rebinding) is still refused.
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import http from "node:http";
import https from "node:https";
import { isIP } from "node:net";
import { Readable } from "node:stream";
import ipaddr from "ipaddr.js";

/** 127.0.0.0/8, ::1 and localhost. Expects URL.hostname (already normalized: "127.1" -> "127.0.0.1"). */
export function isLoopbackHost(hostname: string): boolean {
  const h = hostname.toLowerCase();
  if (h === "localhost" || h === "[::1]" || h === "::1") return true;
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(h);
  return m !== null && m.slice(1).every((o) => Number(o) <= 255) && m[1] === "127";
}

/**
 * Whether `raw` may be fetched: https, or http to a loopback host when allowInsecureLoopback. No
 * credentials in the URL. Returns the parsed URL or the reason it is refused.
 */
export function checkFetchUrl(raw: string, allowInsecureLoopback: boolean): { url: URL } | { refused: string } {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { refused: "not an absolute URL" };
  }
  if (url.username || url.password) return { refused: "credentials in the URL" };
  if (url.protocol === "https:") return { url };
  if (url.protocol !== "http:") return { refused: `scheme ${url.protocol} is not allowed` };
  if (!isLoopbackHost(url.hostname)) return { refused: "plain http is allowed for loopback hosts only" };
  if (!allowInsecureLoopback) return { refused: "plain http is allowed only in development" };
  return { url };
}

/**
 * An address as ipaddr.js reads it, but an IPv6 address ending in a dotted quad is read as written: ipaddr.js
 * reads "::8.8.8.8" (how the system resolver prints an IPv4-compatible address) as "::ffff:8.8.8.8".
 */
function parseAddress(text: string): ipaddr.IPv4 | ipaddr.IPv6 {
  const dotted = /^(.*:)(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})$/.exec(text);
  if (dotted && ipaddr.IPv4.isValidFourPartDecimal(dotted[2]!)) {
    const [a, b, c, d] = ipaddr.IPv4.parse(dotted[2]!).octets as [number, number, number, number];
    return ipaddr.IPv6.parse(`${dotted[1]}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`);
  }
  return ipaddr.parse(text);
}

const IPV4_COMPATIBLE = ipaddr.parseCIDR("::/96");
const NAT64_WELL_KNOWN = ipaddr.parseCIDR("64:ff9b::/96");

/**
 * Why an address may not be dialled when only public destinations are allowed (its ipaddr.js range:
 * "loopback", "private", "linkLocal", "uniqueLocal", "carrierGradeNat", ...), or undefined when it is a
 * public unicast address.
 *
 * IPv6 addresses that carry an IPv4 address reach it, so they are judged by it or refused: IPv4-mapped
 * (::ffff:0:0/96) and NAT64's well-known prefix (64:ff9b::/96, how an IPv6-only network reaches IPv4 hosts) are
 * judged as the IPv4 address they carry; IPv4-compatible addresses (::/96, deprecated, which ipaddr.js calls
 * unicast: ::a9fe:a9fe is 169.254.169.254), 6to4 (2002::/16), Teredo (2001::/32), NAT64's local-use prefix
 * (64:ff9b:1::/48) and SIIT (::ffff:0:0:0/96) are refused whatever they carry.
 */
export function nonPublicRange(address: string): string | undefined {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = parseAddress(address.replace(/^\[|\]$/g, ""));
  } catch {
    return "invalid";
  }
  if (parsed.kind() === "ipv6") {
    const v6 = parsed as ipaddr.IPv6;
    if (v6.isIPv4MappedAddress()) return nonPublicRange(v6.toIPv4Address().toString());
    if (v6.match(NAT64_WELL_KNOWN)) {
      const carried = ipaddr.fromByteArray(v6.toByteArray().slice(12)).toString();
      const range = nonPublicRange(carried);
      return range === undefined ? undefined : `${range} (NAT64 of ${carried})`;
    }
    const range = v6.range();
    if (range === "unicast" && v6.match(IPV4_COMPATIBLE)) return "ipv4Compatible";
    return range === "unicast" ? undefined : range;
  }
  const range = parsed.range();
  return range === "unicast" ? undefined : range;
}

/**
 * Where requests to a destination a user names (an event sink, an identity provider's issuer) may go:
 * plain http to loopback hosts (development), and whether only public addresses may be dialled (production).
 */
export interface OutboundPolicy {
  /** Plain http to loopback hosts is allowed (development). */
  allowInsecureLoopback: boolean;
  /** Only public unicast addresses may be dialled (production). */
  publicOnly: boolean;
  /** Resolves host names (the system resolver unless a test injects one). */
  resolve: Resolver;
}

/**
 * Why the host of a destination a user names is refused under `policy`, as a field violation's description,
 * or undefined: with publicOnly, it must resolve, to public addresses only. The same check runs again on
 * every connection (publicOnlyLookup), so a name that later resolves elsewhere is still refused.
 */
export async function hostRefusal(hostname: string, policy: OutboundPolicy): Promise<string | undefined> {
  if (!policy.publicOnly) return undefined;
  try {
    await publicAddressesOf(hostname, policy.resolve);
    return undefined;
  } catch (err) {
    if (err instanceof ForbiddenAddressError) return `must reach a public address: ${err.message}`;
    return `host ${hostname} does not resolve (${(err as { code?: string }).code ?? "lookup failed"})`;
  }
}

/** Resolves a host name to every address it has (the system resolver by default). */
export type Resolver = (hostname: string) => Promise<LookupAddress[]>;

export const systemResolver: Resolver = (hostname) =>
  new Promise((resolve, reject) => dnsLookup(hostname, { all: true, verbatim: true }, (err, addresses) => (err ? reject(err) : resolve(addresses))));

/** An address refused by the policy; `code` lets callers tell it from network errors. */
export class ForbiddenAddressError extends Error {
  readonly code = "EFORBIDDENADDRESS";
  constructor(
    readonly hostname: string,
    readonly address: string,
    readonly range: string,
  ) {
    super(hostname === address ? `${address} is a ${range} address` : `${hostname} resolves to ${address}, a ${range} address`);
  }
}

/**
 * The addresses of `hostname` (an IP literal is its own), all of them public: any non-public one refuses
 * the whole name, as a name that resolves to one public and one private address may be dialled at either.
 */
export async function publicAddressesOf(hostname: string, resolve: Resolver): Promise<LookupAddress[]> {
  const host = hostname.replace(/^\[|\]$/g, "");
  const family = isIP(host);
  const addresses = family ? [{ address: host, family }] : await resolve(host);
  for (const a of addresses) {
    const range = nonPublicRange(a.address);
    if (range) throw new ForbiddenAddressError(host, a.address, range);
  }
  if (addresses.length === 0) throw Object.assign(new Error(`${host} has no address`), { code: "ENOTFOUND" });
  return addresses;
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for net/tls connections (an http.Agent's `lookup` option) that resolves with `resolve` and
 * refuses non-public addresses. Answers in both shapes Node asks for (`all` or a single address).
 */
export function publicOnlyLookup(resolve: Resolver) {
  return (hostname: string, options: { all?: boolean; family?: number | string }, callback: LookupCallback): void => {
    publicAddressesOf(hostname, resolve).then(
      (addresses) => {
        const wanted = options.family === 4 || options.family === 6 ? addresses.filter((a) => a.family === options.family) : addresses;
        if (wanted.length === 0) return callback(Object.assign(new Error(`${hostname} has no IPv${options.family} address`), { code: "ENOTFOUND" }), []);
        if (options.all) callback(null, wanted);
        else callback(null, wanted[0]!.address, wanted[0]!.family);
      },
      (err: NodeJS.ErrnoException) => callback(err, options.all ? [] : ""),
    );
  };
}

/**
 * A fetch (GET, no request body) that dials public addresses only: names through publicOnlyLookup, IP
 * literals checked before connecting. For outbound calls to places a user names (external issuers' discovery
 * and keys) in production, where a private address must not be reachable through this server.
 */
export function publicOnlyFetch(resolve: Resolver): typeof fetch {
  return outboundFetch({
    lookup: publicOnlyLookup(resolve),
    check: async (url) => {
      if (isIP(url.hostname.replace(/^\[|\]$/g, ""))) await publicAddressesOf(url.hostname, resolve);
    },
  });
}

/**
 * A fetch (GET, no request body) over node:http(s) with the given connect-time `lookup`. Redirects are never
 * followed: with `redirect: "error"` a 3xx throws, otherwise it is answered as is.
 */
export function outboundFetch(opts: { lookup?: ReturnType<typeof publicOnlyLookup>; check?: (url: URL) => Promise<void> } = {}): typeof fetch {
  const agentOptions = { keepAlive: true, ...(opts.lookup ? { lookup: opts.lookup } : {}) };
  const agents = { "http:": new http.Agent(agentOptions), "https:": new https.Agent(agentOptions) };
  return (async (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new TypeError(`scheme ${url.protocol} is not fetched`);
    await opts.check?.(url);
    const signal = init.signal ?? undefined;
    signal?.throwIfAborted();
    const headers = Object.fromEntries(new Headers(init.headers).entries());
    const client = url.protocol === "https:" ? https : http;
    return new Promise<Response>((resolvePromise, reject) => {
      const req = client.request(url, { method: "GET", headers, agent: agents[url.protocol as "http:" | "https:"], signal }, (res) => {
        const status = res.statusCode ?? 0;
        if (status >= 300 && status < 400 && init.redirect === "error") {
          res.destroy();
          return reject(new TypeError(`redirect (HTTP ${status}) not followed`));
        }
        const responseHeaders = new Headers();
        for (const [name, value] of Object.entries(res.headers)) {
          if (value !== undefined) responseHeaders.set(name, Array.isArray(value) ? value.join(", ") : value);
        }
        const body = status === 204 || status === 304 ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>);
        resolvePromise(new Response(body, { status, headers: responseHeaders }));
      });
      req.on("error", reject);
      req.end();
    });
  }) as typeof fetch;
}
