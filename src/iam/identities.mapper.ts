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
import { MAX_NAME_LENGTH } from "./validate.js";

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

/**
 * An identity name (`^[a-z0-9 ._-]{1,}$`) from what a token says of its person: the first of name,
 * preferred_username and email that leaves something once lowercased, stripped of accents, and every run
 * of other characters turned into "-" ("José Pérez" -> "jose perez", "ana@example.com" -> "ana-example.com").
 */
export function identityNameFrom(claims: Record<string, unknown>): string {
  for (const claim of ["name", "preferred_username", "email"]) {
    const value = claims[claim];
    if (typeof value !== "string") continue;
    const name = value
      .normalize("NFKD")
      .replace(/\p{M}+/gu, "")
      .toLowerCase()
      .replace(/[^a-z0-9 ._-]+/g, "-")
      .replace(/\s+/g, " ")
      .replace(/^[\s-]+|[\s-]+$/g, "")
      .slice(0, MAX_NAME_LENGTH)
      .trim();
    if (name !== "") return name;
  }
  return "user";
}

/** The person a verified token names: its issuer and subject, its claims, and extra claims to match on. */
export interface TokenPerson {
  issuer: string;
  subject: string;
  claims: Record<string, unknown>;
  /** Claims the identity's claim_match also requires (an OID provider's {oid}). */
  matchClaims?: Record<string, string>;
}

/**
 * The columns of a new claim-match identity for a token's person (first login through a provider, an
 * accepted invite): named from the token, its email when the token says it is verified (else kept as
 * unverified), claim_match on exactly the token's issuer and subject.
 */
export function identityFromToken(person: TokenPerson): Pick<IdentityFields, "name" | "relationship" | "relationshipType" | "issuer" | "subject"> & { email: string; emailUnverified: string } {
  const { claims } = person;
  const email = typeof claims.email === "string" ? claims.email : "";
  const verifiedEmail = claims.email_verified === true || claims.email_verified === "true";
  const relationship = create(IdentitySchema, {
    relationship: {
      case: "claimMatch",
      value: { iss: { case: "issuer", value: person.issuer }, sub: { case: "subject", value: person.subject }, claims: person.matchClaims ?? {} },
    },
  }).relationship;
  return {
    name: identityNameFrom(claims),
    email: verifiedEmail ? email : "",
    emailUnverified: verifiedEmail ? "" : email,
    ...relationshipColumns(relationship),
  };
}
