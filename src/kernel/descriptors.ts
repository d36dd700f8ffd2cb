// The descriptor registry: every generated API file, and typed readers for the options that carry this
// server's policy (HTTP binding, authorization rule, scope field, event type). Built once at start-up.
import {
  createRegistry,
  getOption,
  hasOption,
  type DescField,
  type DescFile,
  type DescMessage,
  type DescMethod,
  type DescService,
  type Registry,
} from "@bufbuild/protobuf";
import { file_google_protobuf_empty, file_google_protobuf_field_mask } from "@bufbuild/protobuf/wkt";
import { auth, event, event_body, global_data, iam_scope, server_added, type AuthRule, type EventBody, type EventRule } from "../../gen/apiserver/options/v1/options_pb.js";
import { http } from "../../gen/google/api/annotations_pb.js";
import type { HttpRule } from "../../gen/google/api/http_pb.js";
import { field_behavior, FieldBehavior } from "../../gen/google/api/field_behavior_pb.js";
import { file_google_rpc_error_details } from "../../gen/google/rpc/error_details_pb.js";
import { file_google_rpc_status } from "../../gen/google/rpc/status_pb.js";
import { file_capabilities_capabilities } from "../../gen/capabilities/capabilities_pb.js";
import { file_platform_common_v1_uidp_platform } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import { file_platform_oidc_v1_oidc_platform } from "../../gen/platform/oidc/v1/oidc.platform_pb.js";
import { file_chainguard_platform_advisory_v2_advisory } from "../../gen/chainguard/platform/advisory/v2/advisory_pb.js";
import { file_chainguard_platform_events_v2_subscriptions } from "../../gen/chainguard/platform/events/v2/subscriptions_pb.js";
import { file_chainguard_platform_iam_v2_account_associations } from "../../gen/chainguard/platform/iam/v2/account_associations_pb.js";
import { file_chainguard_platform_iam_v2_external_group_role_mappings } from "../../gen/chainguard/platform/iam/v2/external_group_role_mappings_pb.js";
import { file_chainguard_platform_iam_v2_group_invites } from "../../gen/chainguard/platform/iam/v2/group_invites_pb.js";
import { file_chainguard_platform_iam_v2_groups } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { file_chainguard_platform_iam_v2_identities } from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import { file_chainguard_platform_iam_v2_identity_providers } from "../../gen/chainguard/platform/iam/v2/identity_providers_pb.js";
import { file_chainguard_platform_iam_v2_role_bindings } from "../../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import { file_chainguard_platform_iam_v2_roles } from "../../gen/chainguard/platform/iam/v2/roles_pb.js";
import { file_chainguard_platform_iam_v2_terms } from "../../gen/chainguard/platform/iam/v2/terms_pb.js";
import { file_chainguard_platform_libraries_v2_artifacts } from "../../gen/chainguard/platform/libraries/v2/artifacts_pb.js";
import { file_chainguard_platform_ping_v2_ping } from "../../gen/chainguard/platform/ping/v2/ping_pb.js";
import { file_chainguard_platform_registry_v2_images } from "../../gen/chainguard/platform/registry/v2/images_pb.js";
import { file_chainguard_platform_registry_v2_repos } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { file_chainguard_platform_registry_v2_tags } from "../../gen/chainguard/platform/registry/v2/tags_pb.js";
import { file_chainguard_platform_vulnerabilities_v2_advisories } from "../../gen/chainguard/platform/vulnerabilities/v2/advisories_pb.js";
import { file_apiserver_iam_v1_group_access_requests } from "../../gen/apiserver/iam/v1/group_access_requests_pb.js";
import { file_apiserver_iam_v1_group_invites } from "../../gen/apiserver/iam/v1/group_invites_pb.js";

/** The files of the public API surface (the wire contract), in contract order. */
export const apiFiles: readonly DescFile[] = [
  file_capabilities_capabilities,
  file_chainguard_platform_advisory_v2_advisory,
  file_platform_common_v1_uidp_platform,
  file_chainguard_platform_events_v2_subscriptions,
  file_chainguard_platform_iam_v2_account_associations,
  file_chainguard_platform_iam_v2_external_group_role_mappings,
  file_chainguard_platform_iam_v2_group_invites,
  file_chainguard_platform_iam_v2_groups,
  file_chainguard_platform_iam_v2_identities,
  file_chainguard_platform_iam_v2_identity_providers,
  file_chainguard_platform_iam_v2_role_bindings,
  file_chainguard_platform_iam_v2_roles,
  file_chainguard_platform_iam_v2_terms,
  file_chainguard_platform_libraries_v2_artifacts,
  file_chainguard_platform_ping_v2_ping,
  file_chainguard_platform_registry_v2_images,
  file_chainguard_platform_registry_v2_repos,
  file_chainguard_platform_registry_v2_tags,
  file_chainguard_platform_vulnerabilities_v2_advisories,
  file_platform_oidc_v1_oidc_platform,
];

/**
 * The files of this server's own methods, those the contract lacks (DESIGN.md: package `apiserver.*`, never a
 * contract package): served beside the API files, under the same rules (auth and event options, REST
 * bindings), but not part of the wire contract the API files are checked against.
 */
export const serverFiles: readonly DescFile[] = [file_apiserver_iam_v1_group_invites, file_apiserver_iam_v1_group_access_requests];

function withDependencies(roots: readonly DescFile[]): DescFile[] {
  const seen = new Map<string, DescFile>();
  const visit = (file: DescFile): void => {
    if (seen.has(file.name)) return;
    seen.set(file.name, file);
    file.dependencies.forEach(visit);
  };
  roots.forEach(visit);
  return [...seen.values()];
}

/**
 * A reader of a descriptor's option that reads it once per descriptor. Reading an option decodes it from the
 * descriptor's bytes into a new message on every call; the hot path asks on every request (the auth
 * interceptor, field masks, the outbox), so each answer is kept, and shared: callers must not change it.
 */
function remembered<D extends object, T>(read: (descriptor: D) => T): (descriptor: D) => T {
  const answers = new WeakMap<D, { value: T }>();
  return (descriptor) => {
    let answer = answers.get(descriptor);
    if (answer === undefined) answers.set(descriptor, (answer = { value: read(descriptor) }));
    return answer.value;
  };
}

/**
 * Every file the server knows, with all their dependencies: the API files, google.rpc (error details and
 * status) and the well-known types. Server reflection serves these.
 */
export const allFiles: readonly DescFile[] = withDependencies([
  ...apiFiles,
  ...serverFiles,
  file_google_rpc_status,
  file_google_rpc_error_details,
  file_google_protobuf_empty,
  file_google_protobuf_field_mask,
]);

/** Types of every known file, for JSON (Any with @type) and for decoding error details. */
export const registry: Registry = createRegistry(...allFiles);

/** Services of the public API surface. */
export const apiServices: readonly DescService[] = apiFiles.flatMap((f) => f.services);

/** Every method of the public API surface. */
export const apiMethods: readonly DescMethod[] = apiServices.flatMap((s) => s.methods);

/** Every service the server routes: the API's and its own (serverFiles). */
export const servedServices: readonly DescService[] = [...apiServices, ...serverFiles.flatMap((f) => f.services)];

/** Every method the server routes. */
export const servedMethods: readonly DescMethod[] = servedServices.flatMap((s) => s.methods);

/** The method's google.api.http rule, or undefined when it has none. */
export function httpRuleOf(method: DescMethod): HttpRule | undefined {
  return httpRules(method);
}
const httpRules = remembered((method: DescMethod) => (hasOption(method, http) ? getOption(method, http) : undefined));

/** The method's authorization rule, or undefined when it has none (the descriptor test forbids that). */
export function authRuleOf(method: DescMethod): AuthRule | undefined {
  return authRules(method);
}
const authRules = remembered((method: DescMethod) => (hasOption(method, auth) ? getOption(method, auth) : undefined));

/** The CloudEvent a mutation emits, or undefined. */
export function eventRuleOf(method: DescMethod): EventRule | undefined {
  return eventRules(method);
}
const eventRules = remembered((method: DescMethod) => (hasOption(method, event) ? getOption(method, event) : undefined));

/** What an event body keeps of a message (apiserver.options.v1.event_body), when the message says. */
export function eventBodyOf(message: DescMessage): EventBody | undefined {
  return eventBodies(message);
}
const eventBodies = remembered((message: DescMessage) => (hasOption(message, event_body) ? getOption(message, event_body) : undefined));

/** Whether the service serves global data, whose resources belong to no group (apiserver.options.v1.global_data). */
export function isGlobalData(service: DescService): boolean {
  return globalData(service);
}
const globalData = remembered((service: DescService) => hasOption(service, global_data) && getOption(service, global_data));

/** Whether this server added the field to a published message (apiserver.options.v1.server_added). */
export function isServerAdded(field: DescField): boolean {
  return serverAdded(field);
}
const serverAdded = remembered((field: DescField) => hasOption(field, server_added) && getOption(field, server_added));

/** The google.api.field_behavior values of a field. */
export function behaviorsOf(field: DescField): readonly FieldBehavior[] {
  return behaviors(field);
}
const behaviors = remembered((field: DescField): readonly FieldBehavior[] => Object.freeze(hasOption(field, field_behavior) ? getOption(field, field_behavior) : []));

export function isOutputOnly(field: DescField): boolean {
  return behaviorsOf(field).includes(FieldBehavior.OUTPUT_ONLY);
}

export function isImmutable(field: DescField): boolean {
  return behaviorsOf(field).includes(FieldBehavior.IMMUTABLE);
}

export function isRequired(field: DescField): boolean {
  return behaviorsOf(field).includes(FieldBehavior.REQUIRED);
}

/**
 * The path of fields to the authorization scope of a request: the field marked iam_scope, followed into a
 * message-typed field until a string is reached (UpdateGroupRequest: ["group", "uid"]). Undefined when the
 * message has no scope field.
 */
export function scopePathOf(message: DescMessage): readonly DescField[] | undefined {
  return scopePaths(message);
}
const scopePaths = remembered((message: DescMessage) => findScopePath(message));

function findScopePath(message: DescMessage): DescField[] | undefined {
  for (const field of message.fields) {
    if (!hasOption(field, iam_scope) || !getOption(field, iam_scope)) continue;
    if (field.fieldKind === "scalar") return [field];
    if (field.fieldKind === "message") {
      const inner = findScopePath(field.message);
      if (inner) return [field, ...inner];
    }
  }
  return undefined;
}

export { FieldBehavior };
