// AccountAssociation rows <-> chainguard.platform.iam.v2.AccountAssociation. The provider blocks are stored
// as their proto3 JSON (null when unset, so presence survives the round trip), as repos store sync_config.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  AccountAssociation_AmazonSchema,
  AccountAssociation_AzureSchema,
  AccountAssociation_ChainguardSchema,
  AccountAssociation_GitHubSchema,
  AccountAssociation_GoogleSchema,
  AccountAssociationSchema,
  type AccountAssociation,
} from "../../gen/chainguard/platform/iam/v2/account_associations_pb.js";
import type { AccountAssociationFields, AccountAssociationRow } from "../db/schema/index.js";
import { writableOf } from "../kernel/field-mask.js";
import { fromStored, toStored } from "../kernel/stored-json.js";

export function toAccountAssociation(row: AccountAssociationRow): AccountAssociation {
  return create(AccountAssociationSchema, {
    uid: row.uid,
    name: row.name,
    description: row.description,
    amazon: fromStored(AccountAssociation_AmazonSchema, row.amazon),
    google: fromStored(AccountAssociation_GoogleSchema, row.google),
    azure: fromStored(AccountAssociation_AzureSchema, row.azure),
    github: fromStored(AccountAssociation_GitHubSchema, row.github),
    chainguard: fromStored(AccountAssociation_ChainguardSchema, row.chainguard),
    createTime: timestampFromDate(row.createTime),
    updateTime: timestampFromDate(row.updateTime),
  });
}

/** The association as a client may write it: output-only fields (uid, times) dropped. */
export function writableAccountAssociation(a: AccountAssociation): AccountAssociation {
  return writableOf(AccountAssociationSchema, a);
}

/** The client-writable columns of an association message. */
export function accountAssociationFields(a: AccountAssociation): AccountAssociationFields {
  return {
    name: a.name,
    description: a.description,
    amazon: toStored(AccountAssociation_AmazonSchema, a.amazon),
    google: toStored(AccountAssociation_GoogleSchema, a.google),
    azure: toStored(AccountAssociation_AzureSchema, a.azure),
    github: toStored(AccountAssociation_GitHubSchema, a.github),
    chainguard: toStored(AccountAssociation_ChainguardSchema, a.chainguard),
  };
}
