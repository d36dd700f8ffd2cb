// An HTTP request's body, for the routes that read one themselves (the REST gateway, Connect's JSON errors,
// SCIM): read whole under a size cap, and decoded as UTF-8 text or JSON.
import type { Readable } from "node:stream";
import type { JsonValue } from "@bufbuild/protobuf";
import { invalidArgument } from "./errors/index.js";

export class BodyTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`request body larger than ${limit} bytes`);
    this.name = "BodyTooLargeError";
  }
}

export class BodyAbortedError extends Error {
  constructor(cause?: unknown) {
    super("the client closed the request before its body ended", { cause });
    this.name = "BodyAbortedError";
  }
}

/**
 * Reads the whole body, at most limit bytes. Rejects with BodyTooLargeError as soon as the declared or read
 * length passes the limit, without reading (or destroying) the rest, so a response can still be written.
 */
export function readBody(req: Readable & { headers: Record<string, string | string[] | undefined> }, limit: number): Promise<Buffer> {
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limit) return Promise.reject(new BodyTooLargeError(limit));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      req.off("data", onData).off("end", onEnd).off("error", onError).off("close", onClose);
    };
    const onData = (chunk: Buffer | string) => {
      const buf = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
      size += buf.length;
      if (size > limit) {
        cleanup();
        req.pause();
        reject(new BodyTooLargeError(limit));
        return;
      }
      chunks.push(buf);
    };
    const onEnd = () => {
      cleanup();
      resolve(Buffer.concat(chunks, size));
    };
    // A stream error here is the client resetting the request.
    const onError = (err: Error) => {
      cleanup();
      reject(new BodyAbortedError(err));
    };
    const onClose = () => {
      cleanup();
      reject(new BodyAbortedError());
    };
    req.on("data", onData).on("end", onEnd).on("error", onError).on("close", onClose);
  });
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** The body as text. Not UTF-8 -> INVALID_ARGUMENT on "body". */
export function bodyText(bytes: Uint8Array): string {
  try {
    return utf8.decode(bytes);
  } catch {
    throw invalidArgument({ field: "body", description: "is not valid UTF-8" });
  }
}

/** The body as JSON, or undefined when it is empty (only whitespace). Malformed -> INVALID_ARGUMENT on "body". */
export function parseJsonBody(bytes: Uint8Array): JsonValue | undefined {
  const text = bodyText(bytes);
  if (text.trim() === "") return undefined;
  try {
    return JSON.parse(text) as JsonValue;
  } catch (err) {
    const detail = err instanceof SyntaxError ? `: ${err.message}` : "";
    throw invalidArgument({ field: "body", description: `malformed JSON${detail}` });
  }
}
