// gRPC server reflection (grpc.reflection.v1 and v1alpha) for the Connect router, so that grpcurl, buf curl and
// other generic clients can list and call the API with no local schema.
//
// Files are answered with the FileDescriptorProto that protoc-gen-es embeds in the generated code, unchanged.
// Compared with `buf build --exclude-source-info`, every file is identical (dependencies aside, which the
// runtime lists in import-name order): json_name is restored by the runtime, options (google.api.http,
// field_behavior, this server's own method options) are kept as encoded extensions. Only comments are missing
// (no source code info). google/protobuf/descriptor.proto is the runtime's bootstrap copy, which lacks file
// options, reserved ranges and extension declarations; clients need it only as the extendee of the options,
// which it provides (buf curl resolves and calls through it).
import {
  create,
  fromBinary,
  toBinary,
  type DescEnum,
  type DescFile,
  type DescMessage,
  type DescService,
} from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, type ConnectRouter } from "@connectrpc/connect";
import {
  ErrorResponseSchema,
  ExtensionNumberResponseSchema,
  FileDescriptorResponseSchema,
  ListServiceResponseSchema,
  ServerReflection as ServerReflectionV1,
  ServerReflectionRequestSchema,
  ServerReflectionResponseSchema,
  file_grpc_reflection_v1_reflection,
  type ServerReflectionRequest,
  type ServerReflectionResponse,
} from "../../gen/grpc/reflection/v1/reflection_pb.js";
import {
  ServerReflection as ServerReflectionV1alpha,
  ServerReflectionRequestSchema as ServerReflectionRequestSchemaV1alpha,
  ServerReflectionResponseSchema as ServerReflectionResponseSchemaV1alpha,
  file_grpc_reflection_v1alpha_reflection,
  type ServerReflectionRequest as ServerReflectionRequestV1alpha,
  type ServerReflectionResponse as ServerReflectionResponseV1alpha,
} from "../../gen/grpc/reflection/v1alpha/reflection_pb.js";

export interface ReflectionOptions {
  /** The files to describe (their dependencies are followed). The reflection files are always added. */
  readonly files?: readonly DescFile[];
  /**
   * Fully-qualified names of the services to list. Defaults to every service registered on the router at the
   * time of the request. The reflection services are always listed.
   */
  readonly services?: () => readonly string[];
}

/** The names of the reflection services this module registers. */
export const reflectionServiceNames: readonly string[] = [ServerReflectionV1.typeName, ServerReflectionV1alpha.typeName];

/**
 * An index of files and the symbols they declare, built once. `add` only does work for files it has not seen,
 * so it can be fed the files of services registered on the router later without re-indexing.
 */
export interface ReflectionIndex {
  add(files: readonly DescFile[]): void;
  /** The file named (path as in the import statement, with `.proto`). */
  fileByName(name: string): DescFile | undefined;
  /** The file that declares a fully-qualified symbol (leading dot allowed). */
  fileBySymbol(symbol: string): DescFile | undefined;
  /** The file that declares extension `number` of message `extendee`. */
  fileByExtension(extendee: string, number: number): DescFile | undefined;
  /** Known extension numbers of a message, or undefined when the message is unknown. */
  extensionNumbers(extendee: string): number[] | undefined;
  /** The file first, then its transitive dependencies (breadth first), each once. */
  closure(file: DescFile): readonly DescFile[];
  /** The FileDescriptorProto of the file, serialized (computed once). */
  bytes(file: DescFile): Uint8Array;
}

export function createReflectionIndex(files: readonly DescFile[] = []): ReflectionIndex {
  const byName = new Map<string, DescFile>();
  const bySymbol = new Map<string, DescFile>();
  const byExtension = new Map<string, DescFile>();
  const extensionsOf = new Map<string, Set<number>>();
  const messages = new Set<string>();
  const closures = new Map<DescFile, readonly DescFile[]>();
  const encoded = new Map<DescFile, Uint8Array>();

  const symbol = (name: string, file: DescFile): void => {
    if (!bySymbol.has(name)) bySymbol.set(name, file);
  };
  const scoped = (scope: string, name: string): string => (scope ? `${scope}.${name}` : name);

  const indexEnum = (e: DescEnum, file: DescFile): void => {
    symbol(e.typeName, file);
    // Enum values are scoped as siblings of their enum (pkg.VALUE); pkg.Enum.VALUE is accepted as well.
    const scope = e.parent ? e.parent.typeName : file.proto.package;
    for (const v of e.values) symbol(scoped(scope, v.name), file);
    for (const v of e.values) symbol(`${e.typeName}.${v.name}`, file);
  };
  const indexExtension = (typeName: string, extendee: DescMessage, number: number, file: DescFile): void => {
    symbol(typeName, file);
    const key = `${extendee.typeName}#${number}`;
    if (!byExtension.has(key)) byExtension.set(key, file);
    let numbers = extensionsOf.get(extendee.typeName);
    if (!numbers) extensionsOf.set(extendee.typeName, (numbers = new Set()));
    numbers.add(number);
  };
  const indexMessage = (m: DescMessage, file: DescFile): void => {
    symbol(m.typeName, file);
    messages.add(m.typeName);
    for (const f of m.fields) symbol(`${m.typeName}.${f.name}`, file);
    for (const o of m.proto.oneofDecl) symbol(`${m.typeName}.${o.name}`, file);
    for (const x of m.nestedExtensions) indexExtension(x.typeName, x.extendee, x.number, file);
    for (const e of m.nestedEnums) indexEnum(e, file);
    for (const n of m.nestedMessages) indexMessage(n, file);
  };
  const indexService = (s: DescService, file: DescFile): void => {
    symbol(s.typeName, file);
    for (const method of s.methods) symbol(`${s.typeName}.${method.name}`, file);
  };
  const indexFile = (file: DescFile): void => {
    const name = file.proto.name;
    if (byName.has(name)) return;
    byName.set(name, file);
    if (file.proto.package) symbol(file.proto.package, file);
    for (const m of file.messages) indexMessage(m, file);
    for (const e of file.enums) indexEnum(e, file);
    for (const x of file.extensions) indexExtension(x.typeName, x.extendee, x.number, file);
    for (const s of file.services) indexService(s, file);
    file.dependencies.forEach(indexFile);
  };

  const index: ReflectionIndex = {
    add(more) {
      more.forEach(indexFile);
    },
    fileByName: (name) => byName.get(name),
    fileBySymbol: (name) => bySymbol.get(name.startsWith(".") ? name.slice(1) : name),
    fileByExtension: (extendee, number) =>
      byExtension.get(`${extendee.startsWith(".") ? extendee.slice(1) : extendee}#${number}`),
    extensionNumbers(extendee) {
      const name = extendee.startsWith(".") ? extendee.slice(1) : extendee;
      if (!messages.has(name)) return undefined;
      return [...(extensionsOf.get(name) ?? [])].sort((a, b) => a - b);
    },
    closure(file) {
      let list = closures.get(file);
      if (!list) {
        const seen = new Set<string>([file.proto.name]);
        const out: DescFile[] = [file];
        for (let i = 0; i < out.length; i++) {
          for (const dep of out[i]!.dependencies) {
            if (seen.has(dep.proto.name)) continue;
            seen.add(dep.proto.name);
            out.push(dep);
          }
        }
        closures.set(file, (list = out));
      }
      return list;
    },
    bytes(file) {
      let b = encoded.get(file);
      if (!b) encoded.set(file, (b = toBinary(FileDescriptorProtoSchema, file.proto)));
      return b;
    },
  };
  index.add(files);
  return index;
}

/** Per-stream state: files already sent on this stream are not sent again as dependencies (as grpc-go does). */
interface StreamState {
  readonly sent: Set<string>;
}

type ResponseInit = Omit<ServerReflectionResponse, "$typeName" | "$unknown" | "originalRequest" | "validHost">;

function errorResponse(code: Code, message: string): ResponseInit {
  return {
    messageResponse: {
      case: "errorResponse",
      value: create(ErrorResponseSchema, { errorCode: code, errorMessage: message }),
    },
  };
}

function fileResponse(index: ReflectionIndex, file: DescFile, state: StreamState): ResponseInit {
  const protos: Uint8Array[] = [];
  for (const f of index.closure(file)) {
    // The requested file is always sent; its dependencies only if this stream has not had them yet.
    if (f !== file && state.sent.has(f.proto.name)) continue;
    state.sent.add(f.proto.name);
    protos.push(index.bytes(f));
  }
  return {
    messageResponse: {
      case: "fileDescriptorResponse",
      value: create(FileDescriptorResponseSchema, { fileDescriptorProto: protos }),
    },
  };
}

function answer(
  index: ReflectionIndex,
  services: () => readonly string[],
  request: ServerReflectionRequest,
  state: StreamState,
): ServerReflectionResponse {
  const body = ((): ResponseInit => {
    const req = request.messageRequest;
    switch (req.case) {
      case "listServices":
        return {
          messageResponse: {
            case: "listServicesResponse",
            value: create(ListServiceResponseSchema, {
              service: services().map((name) => ({ name })),
            }),
          },
        };
      case "fileByFilename": {
        const file = index.fileByName(req.value);
        return file ? fileResponse(index, file, state) : errorResponse(Code.NotFound, `file not found: ${req.value}`);
      }
      case "fileContainingSymbol": {
        const file = index.fileBySymbol(req.value);
        return file ? fileResponse(index, file, state) : errorResponse(Code.NotFound, `symbol not found: ${req.value}`);
      }
      case "fileContainingExtension": {
        const { containingType, extensionNumber } = req.value;
        const file = index.fileByExtension(containingType, extensionNumber);
        return file
          ? fileResponse(index, file, state)
          : errorResponse(Code.NotFound, `extension not found: ${containingType} ${extensionNumber}`);
      }
      case "allExtensionNumbersOfType": {
        const numbers = index.extensionNumbers(req.value);
        if (!numbers) return errorResponse(Code.NotFound, `type not found: ${req.value}`);
        return {
          messageResponse: {
            case: "allExtensionNumbersResponse",
            value: create(ExtensionNumberResponseSchema, {
              baseTypeName: req.value.startsWith(".") ? req.value.slice(1) : req.value,
              extensionNumber: numbers,
            }),
          },
        };
      }
      default:
        return errorResponse(Code.InvalidArgument, "no message_request set");
    }
  })();
  return create(ServerReflectionResponseSchema, { ...body, validHost: request.host, originalRequest: request });
}

/**
 * Register grpc.reflection.v1.ServerReflection and grpc.reflection.v1alpha.ServerReflection on the router.
 *
 * Symbols of `files` (and of the reflection protos) are indexed now. Services registered on the router later
 * (health, for example) are indexed from their descriptors the first time a request sees a new handler, so
 * every listed service resolves even when its file is missing from `files`.
 */
export function registerReflection(router: ConnectRouter, opts: ReflectionOptions = {}): void {
  const index = createReflectionIndex([
    ...(opts.files ?? []),
    file_grpc_reflection_v1_reflection,
    file_grpc_reflection_v1alpha_reflection,
  ]);
  let handlersSeen = 0;
  const sync = (): void => {
    if (router.handlers.length === handlersSeen) return;
    const handlers = router.handlers.slice(handlersSeen);
    handlersSeen = router.handlers.length;
    index.add(handlers.map((h) => h.service.file));
  };
  const services = (): readonly string[] => {
    const names = opts.services ? opts.services() : router.handlers.map((h) => h.service.typeName);
    return [...new Set([...names, ...reflectionServiceNames])];
  };

  async function* serve(requests: AsyncIterable<ServerReflectionRequest>): AsyncIterable<ServerReflectionResponse> {
    const state: StreamState = { sent: new Set() };
    for await (const request of requests) {
      sync();
      yield answer(index, services, request, state);
    }
  }

  router.service(ServerReflectionV1, { serverReflectionInfo: serve });
  // v1alpha is wire-identical to v1: translate through the binary form.
  router.service(ServerReflectionV1alpha, {
    async *serverReflectionInfo(
      requests: AsyncIterable<ServerReflectionRequestV1alpha>,
    ): AsyncIterable<ServerReflectionResponseV1alpha> {
      async function* toV1(): AsyncIterable<ServerReflectionRequest> {
        for await (const r of requests) {
          yield fromBinary(ServerReflectionRequestSchema, toBinary(ServerReflectionRequestSchemaV1alpha, r));
        }
      }
      for await (const response of serve(toV1())) {
        yield fromBinary(ServerReflectionResponseSchemaV1alpha, toBinary(ServerReflectionResponseSchema, response));
      }
    },
  });
}
