// The single error boundary: the outermost interceptor. Every error leaving a handler passes here and leaves
// in its public form (public.ts).
import type { Interceptor } from "@connectrpc/connect";
import { errorDomainOf, toPublicError } from "./public.js";

export function createErrorBoundary(serviceDomain: string): Interceptor {
  return (next) => async (req) => {
    try {
      return await next(req);
    } catch (err) {
      throw toPublicError(err, errorDomainOf(req.method, serviceDomain), { procedure: req.url });
    }
  };
}
