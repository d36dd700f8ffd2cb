// Identity rows <-> chainguard.platform.iam.v2.Identity and IdentityMetadata messages. The relationship
// oneof is stored as its proto3 JSON ({"claimMatch": {...}}, {"servicePrincipal": "SERVICE_PRINCIPAL_..."}),
// the metadata (apart from the fields that are identity columns) likewise.
import { clone, create, fromJson, toJson, type JsonValue } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  IdentityMetadataSchema,
  IdentitySchema,
  RelationshipType,
  type Identity,
  type IdentityMetadata,
} from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import type { IdentityFields, IdentityMetadataFields, IdentityRow } from "../db/schema/index.js";

/** The relationship columns: the oneof as proto3 JSON, its type, and exact issuer/subject when it has them. */
export type RelationshipColumns = Pick<IdentityFields, "relationship" | "relationshipType" | "issuer" | "subject">;

const relationshipTypes: Record<NonNullable<Identity["relationship"]["case"]>, RelationshipType> = {
  claimMatch: RelationshipType.CLAIM_MATCH,
  staticKeys: RelationshipType.STATIC,
  awsIdentity: RelationshipType.AWS_IDENTITY,
  servicePrincipal: RelationshipType.SERVICE_PRINCIPAL,
};

/** The stored relationship JSON as the oneof value; an unreadable one reads as unset. */
export function relationshipOf(json: Record<string, unknown>): Identity["relationship"] {
  try {
    return fromJson(IdentitySchema, json as JsonValue, { ignoreUnknownFields: true }).relationship;
  } catch {
    return { case: undefined };
  }
}

export function toIdentity(row: IdentityRow): Identity {
  return create(IdentitySchema, {
    uid: row.uid,
    name: row.name,
    description: row.description,
    email: row.email,
    emailUnverified: row.emailUnverified,
    company: row.company,
    lastSeenTime: row.lastSeenTime ? timestampFromDate(row.lastSeenTime) : undefined,
    createTime: timestampFromDate(row.createTime),
    updateTime: timestampFromDate(row.updateTime),
    relationship: relationshipOf(row.relationship),
  });
}

export function relationshipColumns(relationship: Identity["relationship"]): RelationshipColumns {
  const json = toJson(IdentitySchema, create(IdentitySchema, { relationship })) as Record<string, unknown>;
  let issuer: string | null = null;
  let subject: string | null = null;
  if (relationship.case === "claimMatch") {
    const m = relationship.value;
    if (m.iss.case === "issuer") issuer = m.iss.value;
    if (m.sub.case === "subject") subject = m.sub.value;
  } else if (relationship.case === "staticKeys") {
    issuer = relationship.value.issuer;
    subject = relationship.value.subject;
  }
  const relationshipType = relationship.case ? relationshipTypes[relationship.case] : RelationshipType.UNSPECIFIED;
  return { relationship: json, relationshipType, issuer, subject };
}

/** The client-writable fields of an identity message (output-only fields are never taken from a request). */
export function identityFields(identity: Identity): IdentityFields {
  return {
    name: identity.name,
    description: identity.description,
    company: identity.company,
    ...relationshipColumns(identity.relationship),
  };
}

/** The identity's metadata: uid and name from the identity, company from its column, the rest stored. */
export function toIdentityMetadata(row: IdentityRow): IdentityMetadata {
  let stored: IdentityMetadata;
  try {
    stored = fromJson(IdentityMetadataSchema, row.metadata as JsonValue, { ignoreUnknownFields: true });
  } catch {
    stored = create(IdentityMetadataSchema);
  }
  stored.uid = row.uid;
  stored.name = row.name;
  stored.company = row.company;
  return stored;
}

export function identityMetadataFields(metadata: IdentityMetadata): IdentityMetadataFields {
  const rest = clone(IdentityMetadataSchema, metadata);
  rest.uid = "";
  rest.name = "";
  rest.company = "";
  return { company: metadata.company, metadata: toJson(IdentityMetadataSchema, rest) as Record<string, unknown> };
}
