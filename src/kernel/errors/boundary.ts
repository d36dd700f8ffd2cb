// The single error boundary: the outermost interceptor. Every error leaving a handler passes here and leaves
// in its public form (public.ts), carrying the request's id; its code is recorded for the access line.
import type { Interceptor } from "@connectrpc/connect";
import { requestKey } from "../request.js";
import { errorDomainOf, toPublicError } from "./public.js";

export function createErrorBoundary(serviceDomain: string): Interceptor {
  return (next) => async (req) => {
    try {
      return await next(req);
    } catch (err) {
      const record = req.contextValues.get(requestKey);
      const error = toPublicError(err, errorDomainOf(req.method, serviceDomain), { procedure: req.url, requestId: record?.id });
      if (record) record.code = error.code;
      throw error;
    }
  };
}
