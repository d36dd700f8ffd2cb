// The managed (built-in) roles of roles.md. They exist from the first start, live at the root (plain uid,
// no '/'), are readable by every authenticated caller, and cannot be changed or deleted.
import { createHash } from "node:crypto";
import { sql } from "drizzle-orm";
import { Capability, CapabilitySchema } from "../../gen/capabilities/capabilities_pb.js";
import type { Db } from "../db/client.js";
import { roles } from "../db/schema/index.js";
import { updateWhereChanged } from "../kernel/store.js";

/** Every capability whose enum name starts with CAP_<prefix> (e.g. "IAM_GROUPS_" -> create/update/list/delete). */
function withPrefix(prefix: string): Capability[] {
  return CapabilitySchema.values.filter((v) => v.name.startsWith(`CAP_${prefix}`)).map((v) => v.number as Capability);
}

const C = Capability;

const consoleViewer: Capability[] = [
  C.CAP_EVENTS_SUBSCRIPTION_LIST, C.CAP_IAM_ACCOUNT_ASSOCIATIONS_LIST, C.CAP_IAM_GROUP_INVITES_LIST, C.CAP_IAM_GROUPS_LIST,
  C.CAP_IAM_ROLE_BINDINGS_LIST, C.CAP_IAM_ROLES_LIST, C.CAP_IAM_IDENTITY_LIST, C.CAP_IAM_IDENTITY_PROVIDERS_LIST, C.CAP_REPO_LIST,
  C.CAP_MANIFEST_LIST, C.CAP_REFERRERS_LIST, C.CAP_TAG_LIST, C.CAP_MANIFEST_METADATA_LIST, C.CAP_APK_LIST, C.CAP_VERSION_LIST,
  C.CAP_VULN_REPORT_LIST, C.CAP_LIBRARIES_ENTITLEMENTS_LIST, C.CAP_LIBRARIES_ARTIFACTS_LIST, C.CAP_ADVISORIES_LIST,
];
const viewer = [...consoleViewer, C.CAP_REPO_BLOBS_GET, C.CAP_APK_BLOBS_GET];
const editor = [
  ...viewer,
  C.CAP_EVENTS_SUBSCRIPTION_CREATE, C.CAP_EVENTS_SUBSCRIPTION_UPDATE, C.CAP_EVENTS_SUBSCRIPTION_DELETE,
  C.CAP_REPO_CREATE, C.CAP_REPO_UPDATE, C.CAP_REPO_DELETE,
];
const registryPull = [C.CAP_REPO_BLOBS_GET, C.CAP_IAM_GROUPS_LIST, C.CAP_REPO_LIST, C.CAP_MANIFEST_LIST, C.CAP_REFERRERS_LIST, C.CAP_TAG_LIST, C.CAP_MANIFEST_METADATA_LIST];
const registryPush = [
  ...registryPull,
  C.CAP_REPO_CREATE, C.CAP_REPO_UPDATE, C.CAP_REPO_DELETE, C.CAP_MANIFEST_CREATE, C.CAP_MANIFEST_UPDATE, C.CAP_MANIFEST_DELETE,
  C.CAP_TAG_CREATE, C.CAP_TAG_UPDATE, C.CAP_TAG_DELETE, C.CAP_IAM_GROUPS_CREATE,
];
const owner = [
  ...editor,
  ...["IAM_GROUPS_", "IAM_IDENTITY_", "IAM_IDENTITY_PROVIDERS_", "IAM_ROLES_", "IAM_ROLE_BINDINGS_", "IAM_ACCOUNT_ASSOCIATIONS_", "IAM_GROUP_INVITES_"].flatMap(withPrefix),
  C.CAP_IAM_SCIM_MANAGE, C.CAP_TERMS_ACCEPT, C.CAP_TERMS_LIST, C.CAP_VULN_CREATE, C.CAP_VULN_REPORT_CREATE,
  ...registryPush,
];

export interface ManagedRole {
  uid: string;
  name: string;
  description: string;
  capabilities: Capability[];
}

/** Managed role uids are stable across installations: 40 hex characters derived from the name. */
export function managedRoleUid(name: string): string {
  return createHash("sha1").update(`managed-role:${name}`).digest("hex");
}

function role(name: string, description: string, caps: Capability[]): ManagedRole {
  return { uid: managedRoleUid(name), name, description, capabilities: [...new Set(caps)].sort((a, b) => a - b) };
}

export const managedRoles: readonly ManagedRole[] = [
  role("viewer", "Read everything, and pull images and packages.", viewer),
  role("console_viewer", "Read everything (no pulls).", consoleViewer),
  role("editor", "Viewer, plus managing repos and event subscriptions; no IAM changes.", editor),
  role("owner", "Everything, including IAM changes and grants.", owner),
  role("registry.pull", "Pull images.", registryPull),
  role("registry.push", "Pull and push images, manage repos and tags.", registryPush),
  role("registry.pull_token_creator", "Pull images and create pull-token identities.", [
    ...registryPull, C.CAP_IAM_ROLE_BINDINGS_CREATE, C.CAP_IAM_IDENTITY_CREATE, C.CAP_IAM_ROLES_LIST, C.CAP_IAM_GROUPS_LIST,
  ]),
  role("apk.pull", "Pull packages.", [C.CAP_APK_BLOBS_GET, C.CAP_IAM_GROUPS_LIST, C.CAP_APK_LIST]),
];

export function managedRole(name: string): ManagedRole {
  const r = managedRoles.find((m) => m.name === name);
  if (!r) throw new Error(`no managed role ${name}`);
  return r;
}

/** Creates or refreshes the managed roles (idempotent; every replica may run it at start). */
export async function ensureManagedRoles(db: Db): Promise<void> {
  // One statement for all of them (this runs at every start, before the server listens).
  await db
    .insert(roles)
    .values(managedRoles.map((r) => ({ uid: r.uid, parentUid: null, name: r.name, description: r.description, capabilities: r.capabilities, managed: true })))
    .onConflictDoUpdate({
      target: roles.uid,
      ...updateWhereChanged({ description: roles.description, capabilities: roles.capabilities }, { updateTime: sql`now()` }),
    });
}
