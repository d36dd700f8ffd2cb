// Validation of account associations as clients send them, and the readiness check of a stored provider
// block. Violation paths are proto field names relative to the association (`amazon.account`,
// `azure.client_ids["web"]`, `github.app_installations[42].installations[0].installation_id`); the service
// reports them under `account_association`. On update only the fields and blocks that changed are checked (a
// block whole, when anything in it changed: a stored block is always complete), so a value stored under older
// rules never blocks an unrelated change.
//
// The rules (what can be checked without calling the provider):
// - name: required, at most 256 characters, no control characters; description: at most 4096 characters.
// - amazon.account: required, an AWS account id: exactly 12 digits.
// - google.project_id: required, a GCP project id: 6 to 30 characters, lowercase letters, digits and hyphens,
//   starting with a letter, not ending with a hyphen. google.project_number: required, 1 to 20 digits.
// - azure.tenant_id: required, a UUID (8-4-4-4-12 hex digits). azure.client_ids: required (at least one
//   entry), at most 64; each key 1 to 256 characters without control characters, each value a UUID.
// - github.app_installations: optional, at most 64 apps; each key (the GitHub App id) a positive integer; at
//   most 256 installations per app, each with a positive installation_id (no repeat within the app) and an
//   optional name of at most 256 characters.
// - chainguard.service_bindings: required (at least one entry), at most 64. A key names a Chainguard service:
//   a letter followed by letters, digits, "_", "." or "-", at most 63 characters (for example "INGESTER").
//   A value is the uid of the identity the service acts as: a well-formed uid (the identity's existence is
//   not checked: it may belong to the service's own organization).
import type {
  AccountAssociation,
  AccountAssociation_Amazon,
  AccountAssociation_Azure,
  AccountAssociation_Chainguard,
  AccountAssociation_GitHub,
  AccountAssociation_Google,
} from "../../gen/chainguard/platform/iam/v2/account_associations_pb.js";
import type { FieldViolation } from "../kernel/errors/index.js";
import { isValidUid } from "../kernel/uidp.js";

export const MAX_NAME_LENGTH = 256;
export const MAX_DESCRIPTION_LENGTH = 4096;
export const MAX_MAP_ENTRIES = 64;
export const MAX_KEY_LENGTH = 256;
export const MAX_INSTALLATIONS = 256;
export const MAX_INSTALLATION_NAME_LENGTH = 256;

export const AWS_ACCOUNT = /^[0-9]{12}$/;
export const GCP_PROJECT_ID = /^[a-z][a-z0-9-]{4,28}[a-z0-9]$/;
export const GCP_PROJECT_NUMBER = /^[0-9]{1,20}$/;
export const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
export const SERVICE_NAME = /^[A-Za-z][A-Za-z0-9_.-]{0,62}$/;
const POSITIVE_INT64 = /^[1-9][0-9]{0,18}$/;

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

type Only = readonly string[] | undefined;
/** Whether `field` is to be checked: always on create; on update when a changed path is it, inside it, or holds it. */
const checks = (only: Only, field: string) => only === undefined || only.some((p) => p === field || p.startsWith(field + ".") || field.startsWith(p + "."));

/** A violation, and whether it is a missing value (INCOMPLETE for the check) or a wrong one. */
export interface BlockViolation extends FieldViolation {
  missing?: boolean;
}

const required = (field: string): BlockViolation => ({ field, description: "is required", missing: true });
const key = (k: string) => `[${JSON.stringify(k)}]`;

function pattern(field: string, value: string, re: RegExp, what: string): BlockViolation[] {
  if (value === "") return [required(field)];
  return re.test(value) ? [] : [{ field, description: `must be ${what}` }];
}

export function amazonViolations(a: AccountAssociation_Amazon): BlockViolation[] {
  return pattern("amazon.account", a.account, AWS_ACCOUNT, "an AWS account id: exactly 12 digits");
}

export function googleViolations(g: AccountAssociation_Google): BlockViolation[] {
  const out: BlockViolation[] = [];
  out.push(
    ...pattern(
      "google.project_id",
      g.projectId,
      GCP_PROJECT_ID,
      "a Google Cloud project id: 6 to 30 lowercase letters, digits or hyphens, starting with a letter and not ending with a hyphen",
    ),
  );
  out.push(...pattern("google.project_number", g.projectNumber, GCP_PROJECT_NUMBER, "a Google Cloud project number: 1 to 20 digits"));
  return out;
}

export function azureViolations(a: AccountAssociation_Azure): BlockViolation[] {
  const out: BlockViolation[] = [];
  out.push(...pattern("azure.tenant_id", a.tenantId, UUID, "an Azure tenant id: a UUID"));
  const entries = Object.entries(a.clientIds);
  if (entries.length === 0) out.push({ ...required("azure.client_ids"), description: "is required: at least one client id" });
  else if (entries.length > MAX_MAP_ENTRIES) out.push({ field: "azure.client_ids", description: `at most ${MAX_MAP_ENTRIES} entries` });
  else {
    for (const [k, v] of entries) {
      const at = `azure.client_ids${key(k)}`;
      if (k === "" || k.length > MAX_KEY_LENGTH || CONTROL.test(k)) {
        out.push({ field: at, description: `the key must be 1 to ${MAX_KEY_LENGTH} characters without control characters` });
      } else out.push(...pattern(at, v, UUID, "an Azure client (application) id: a UUID"));
    }
  }
  return out;
}

export function githubViolations(g: AccountAssociation_GitHub): BlockViolation[] {
  const out: BlockViolation[] = [];
  const apps = Object.entries(g.appInstallations);
  if (apps.length > MAX_MAP_ENTRIES) return [{ field: "github.app_installations", description: `at most ${MAX_MAP_ENTRIES} entries` }];
  for (const [app, { installations }] of apps) {
    const at = `github.app_installations[${app}]`;
    if (!POSITIVE_INT64.test(app)) {
      out.push({ field: at, description: "the key must be a GitHub App id: a positive integer" });
      continue;
    }
    if (installations.length > MAX_INSTALLATIONS) {
      out.push({ field: `${at}.installations`, description: `at most ${MAX_INSTALLATIONS} entries` });
      continue;
    }
    const seen = new Set<bigint>();
    installations.forEach((inst, i) => {
      const here = `${at}.installations[${i}]`;
      if (inst.installationId === 0n) out.push(required(`${here}.installation_id`));
      else if (inst.installationId < 0n) out.push({ field: `${here}.installation_id`, description: "must be a positive integer" });
      else if (seen.has(inst.installationId)) out.push({ field: `${here}.installation_id`, description: "must not repeat an installation of the same app" });
      seen.add(inst.installationId);
      if (inst.name.length > MAX_INSTALLATION_NAME_LENGTH || CONTROL.test(inst.name)) {
        out.push({ field: `${here}.name`, description: `must be at most ${MAX_INSTALLATION_NAME_LENGTH} characters without control characters` });
      }
    });
  }
  return out;
}

export function chainguardViolations(c: AccountAssociation_Chainguard): BlockViolation[] {
  const entries = Object.entries(c.serviceBindings);
  if (entries.length === 0) return [{ ...required("chainguard.service_bindings"), description: "is required: at least one service binding" }];
  if (entries.length > MAX_MAP_ENTRIES) return [{ field: "chainguard.service_bindings", description: `at most ${MAX_MAP_ENTRIES} entries` }];
  const out: BlockViolation[] = [];
  for (const [k, v] of entries) {
    const at = `chainguard.service_bindings${key(k)}`;
    if (!SERVICE_NAME.test(k)) {
      out.push({ field: at, description: 'the key must name a service: a letter, then letters, digits, "_", "." or "-", at most 63 characters' });
    } else if (v === "") out.push(required(at));
    else if (!isValidUid(v)) out.push({ field: at, description: "must be the uid of the identity the service acts as" });
  }
  return out;
}

/** Checks an association as it would be stored: every field (create), or only the paths an update changed. */
export function accountAssociationViolations(a: AccountAssociation, only?: Only): FieldViolation[] {
  const out: BlockViolation[] = [];
  if (checks(only, "name")) {
    if (a.name === "") out.push(required("name"));
    else if (a.name.length > MAX_NAME_LENGTH) out.push({ field: "name", description: `must be at most ${MAX_NAME_LENGTH} characters long` });
    else if (CONTROL.test(a.name)) out.push({ field: "name", description: "must not contain control characters" });
  }
  if (checks(only, "description") && a.description.length > MAX_DESCRIPTION_LENGTH) {
    out.push({ field: "description", description: `must be at most ${MAX_DESCRIPTION_LENGTH} characters long` });
  }
  // A block is checked whole when anything in it changed: what is stored is always complete.
  if (a.amazon && checks(only, "amazon")) out.push(...amazonViolations(a.amazon));
  if (a.google && checks(only, "google")) out.push(...googleViolations(a.google));
  if (a.azure && checks(only, "azure")) out.push(...azureViolations(a.azure));
  if (a.github && checks(only, "github")) out.push(...githubViolations(a.github));
  if (a.chainguard && checks(only, "chainguard")) out.push(...chainguardViolations(a.chainguard));
  return out.map(({ field, description }) => ({ field, description }));
}
