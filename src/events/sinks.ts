// Which sinks a subscription may name, and where its deliveries may connect (kernel/outbound.ts).
//
// A sink is an absolute https URL (plain http only to a loopback host, in development), without
// credentials (deliveries authenticate with a signed token instead) or fragment, of at most 2,048
// characters, with no whitespace or control character (the URL parser would trim or encode them, so the
// stored sink would not be the URL dialled; NUL cannot be stored at all). In production its host must
// resolve to public addresses only: checked when the subscription is created, and again on every connection
// a delivery makes (the delivery client's lookup), so a name that later resolves to a private address is
// refused at connect time.
import type { FieldViolation } from "../kernel/errors/index.js";
import { checkFetchUrl, hostRefusal, systemResolver, type OutboundPolicy, type Resolver } from "../kernel/outbound.js";

export const MAX_SINK_LENGTH = 2048;

// eslint-disable-next-line no-control-regex
const SPACE_OR_CONTROL = /[\s\u0000-\u001f\u007f-\u009f]/;

/** Where sinks may be and deliveries may connect: the outbound policy of destinations a user names. */
export type SinkPolicy = OutboundPolicy;

/** The policy of a server mode: development allows loopback http and any address; production neither. */
export function sinkPolicyFor(mode: "development" | "production", resolve: Resolver = systemResolver): SinkPolicy {
  return { allowInsecureLoopback: mode === "development", publicOnly: mode === "production", resolve };
}

/**
 * The sink as stored and compared: the URL parser's serialisation (scheme and host lowercased, a default port
 * dropped, an empty path made "/"), so `HTTPS://Hooks.Example.com:443` and `https://hooks.example.com/` are
 * one sink. Only for a sink without violations.
 */
export function normalizeSink(sink: string): string {
  return new URL(sink).href;
}

/** What is wrong with a sink, as violations of `field`; empty when it may be subscribed. */
export async function sinkViolations(sink: string, policy: SinkPolicy, field = "sink"): Promise<FieldViolation[]> {
  if (sink === "") return [{ field, description: "is required" }];
  if (sink.length > MAX_SINK_LENGTH) return [{ field, description: `must be at most ${MAX_SINK_LENGTH} characters` }];
  if (SPACE_OR_CONTROL.test(sink)) return [{ field, description: "must not contain whitespace or control characters (percent-encode them)" }];
  const checked = checkFetchUrl(sink, policy.allowInsecureLoopback);
  if ("refused" in checked) return [{ field, description: `must be an https URL: ${checked.refused}` }];
  if (checked.url.hash || sink.includes("#")) return [{ field, description: "must not have a fragment" }];
  const refusal = await hostRefusal(checked.url.hostname, policy);
  return refusal === undefined ? [] : [{ field, description: refusal }];
}
