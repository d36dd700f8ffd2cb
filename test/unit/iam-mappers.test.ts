// The IAM mappers build plain message objects (no create() per row): each must be the message create() gives
// for the same fields, field for field and on the wire.
import { create, equals, toBinary } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { GroupSchema, OrgKind, OrgStatus } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { RoleBindingSchema } from "../../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import { toGroup } from "../../src/iam/groups.mapper.js";
import { toRoleBinding } from "../../src/iam/role-bindings.mapper.js";

const created = new Date(Date.UTC(1969, 11, 31, 23, 59, 59, 123));
const updated = new Date(Date.UTC(2026, 10, 27, 17, 0, 0, 456));

describe("IAM mappers", () => {
  it.each([
    ["with subject and issuer", "sub", "https://issuer.example"],
    ["without subject and issuer", null, null],
  ])("toRoleBinding, %s: the message create() gives", (_, subject, issuer) => {
    const row = {
      uid: "g/b",
      groupUid: "g",
      identityUid: "g/i",
      roleUid: "r",
      createTime: created,
      updateTime: updated,
      identityName: "robot",
      identityDescription: "d",
      identitySubject: subject,
      identityIssuer: issuer,
      identityEmail: "robot@example.com",
      groupName: "group",
      groupDescription: "gd",
      roleName: "viewer",
      roleDescription: "rd",
    };
    const want = create(RoleBindingSchema, {
      uid: row.uid,
      identityUid: row.identityUid,
      roleUid: row.roleUid,
      identity: { uid: row.identityUid, name: "robot", description: "d", subject: subject ?? "", issuer: issuer ?? "", email: "robot@example.com" },
      group: { uid: "g", name: "group", description: "gd" },
      role: { uid: "r", name: "viewer", description: "rd" },
      createTime: timestampFromDate(created),
      updateTime: timestampFromDate(updated),
    });
    const got = toRoleBinding(row);
    expect(got).toEqual(want);
    expect(equals(RoleBindingSchema, got, want)).toBe(true);
    expect(toBinary(RoleBindingSchema, got)).toEqual(toBinary(RoleBindingSchema, want));
  });

  it("toGroup: the message create() gives", () => {
    const row = { uid: "g", parentUid: null, name: "group", description: "d", verified: true, kind: OrgKind.CUSTOMER, status: OrgStatus.READY, createTime: created, updateTime: updated };
    const want = create(GroupSchema, {
      uid: "g",
      name: "group",
      description: "d",
      verified: true,
      kind: OrgKind.CUSTOMER,
      status: OrgStatus.READY,
      createTime: timestampFromDate(created),
      updateTime: timestampFromDate(updated),
    });
    const got = toGroup(row);
    expect(got).toEqual(want);
    expect(equals(GroupSchema, got, want)).toBe(true);
    expect(toBinary(GroupSchema, got)).toEqual(toBinary(GroupSchema, want));
  });
});
