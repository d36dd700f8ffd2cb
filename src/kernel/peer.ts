// The network address of the caller: the TCP peer of the connection a request arrived on, put in the
// request's context values by the server itself (request.ts callContextValues, for a call on any protocol). Never read from a header: anything a client sends (X-Forwarded-For, Forwarded) is the client's
// word. Behind a proxy or load balancer this is the proxy's address.
import { createContextKey, createContextValues, type ContextValues, type HandlerContext } from "@connectrpc/connect";

export const peerAddressKey = createContextKey<string | undefined>(undefined, { description: "the TCP peer address of the request's connection" });

/** Context values carrying the peer address of a Node request (http, http2, or the REST gateway's). */
export function peerContextValues(req: { socket?: { remoteAddress?: string | undefined } | null }): ContextValues {
  const values = createContextValues();
  const address = req.socket?.remoteAddress;
  if (address) values.set(peerAddressKey, address);
  return values;
}

/** The caller's network address, when the server recorded one. */
export function peerAddressOf(ctx: Pick<HandlerContext, "values">): string | undefined {
  return ctx.values.get(peerAddressKey);
}
