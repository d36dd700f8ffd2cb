// The SCIM filter subset (parse, evaluate on elements) and PATCH operations on a User, without a server.
import { describe, expect, it } from "vitest";
import { matchesScimFilter, parseScimFilter, ScimFilterError } from "../../src/iam/scim.filter.js";
import { applyPatch, PATCH_SCHEMA, ScimError, userFields } from "../../src/iam/scim.mapper.js";

describe("parseScimFilter", () => {
  it("parses eq comparisons joined by and/or, with parentheses, and strips the User schema URN", () => {
    expect(parseScimFilter('userName eq "a b\\"c"')).toEqual({ kind: "compare", attr: "username", op: "eq", value: 'a b"c' });
    expect(parseScimFilter('urn:ietf:params:scim:schemas:core:2.0:User:userName EQ "x"')).toMatchObject({ attr: "username", value: "x" });
    expect(parseScimFilter('a eq "1" or b eq true and c eq null')).toEqual({
      kind: "or",
      left: { kind: "compare", attr: "a", op: "eq", value: "1" },
      right: { kind: "and", left: { kind: "compare", attr: "b", op: "eq", value: true }, right: { kind: "compare", attr: "c", op: "eq", value: null } },
    });
    expect(parseScimFilter('(a eq "1" or b eq "2") and c eq 3')).toMatchObject({ kind: "and", left: { kind: "or" }, right: { value: 3 } });
    expect(parseScimFilter('name.givenName eq "A"')).toMatchObject({ attr: "name.givenname" });
  });

  it("refuses what it does not support or cannot read, saying what", () => {
    const cases: Array<[string, RegExp]> = [
      ['userName sw "a"', /"sw" is not supported/],
      ['not (a eq "1")', /"not" is not supported/],
      ["userName eq", /expected a value/],
      ['userName "a"', /expected an operator/],
      ['a eq "1" and', /ends where a comparison/],
      ['(a eq "1"', /parenthesis is not closed/],
      ['a eq "1")', /unexpected/],
      ['a eq "x', /not closed/],
      ["a eq x", /not a value/],
      ['emails[type eq "work"] eq "x"', /not an attribute path/],
      ["", /ends where a comparison/],
    ];
    for (const [text, message] of cases) {
      expect(() => parseScimFilter(text), text).toThrow(ScimFilterError);
      expect(() => parseScimFilter(text), text).toThrow(message);
    }
    expect(() => parseScimFilter(`a eq "${"x".repeat(5000)}"`)).toThrow(/longer than/);
  });

  it("evaluates on an element: attribute names and strings case-insensitively, others exactly", () => {
    const email = { value: "A@example.com", Type: "Work", primary: true };
    expect(matchesScimFilter(parseScimFilter('type eq "work"'), email)).toBe(true);
    expect(matchesScimFilter(parseScimFilter('value eq "a@EXAMPLE.com" and primary eq true'), email)).toBe(true);
    expect(matchesScimFilter(parseScimFilter('primary eq "true"'), email)).toBe(false);
    expect(matchesScimFilter(parseScimFilter('type eq "home" or display eq null'), email)).toBe(true);
    expect(matchesScimFilter(parseScimFilter('type eq "home"'), email)).toBe(false);
  });
});

describe("applyPatch", () => {
  const base = () => ({
    userName: "alice",
    externalId: "e1",
    active: true,
    name: { givenName: "Alice" },
    emails: [
      { value: "a@work", type: "work", primary: true },
      { value: "a@home", type: "home" },
    ],
  });
  const patch = (...Operations: unknown[]) => ({ schemas: [PATCH_SCHEMA], Operations });
  const scimType = (fn: () => unknown) => {
    try {
      fn();
    } catch (err) {
      if (err instanceof ScimError) return `${err.status} ${err.scimType}`;
      throw err;
    }
    return "no error";
  };

  it("applies add, replace and remove in order, leaving its input alone", () => {
    const user = base();
    const out = applyPatch(
      user,
      patch(
        { op: "replace", path: "name.familyName", value: "Liddell" },
        { op: "Add", path: "emails", value: [{ value: "a@other" }] },
        { op: "remove", path: 'emails[type eq "home"]' },
        { op: "replace", path: 'emails[primary eq true].value', value: "new@work" },
        { op: "replace", value: { displayName: "Al", "name.givenName": "Alicia", active: "False" } },
        { op: "remove", path: "urn:ietf:params:scim:schemas:core:2.0:User:externalId" },
        { op: "add", path: "externalId", value: "e2" },
      ),
    );
    expect(out).toEqual({
      userName: "alice",
      externalId: "e2",
      active: "False",
      displayName: "Al",
      name: { givenName: "Alicia", familyName: "Liddell" },
      emails: [{ value: "new@work", type: "work", primary: true }, { value: "a@other" }],
    });
    expect(user).toEqual(base());
    expect(userFields(out)).toMatchObject({ active: false, email: "new@work", externalId: "e2" });
  });

  it("replaces or merges the elements a filter selects; add through an unmatched filter creates the element", () => {
    expect(applyPatch(base(), patch({ op: "replace", path: 'emails[type eq "home"]', value: { value: "h2" } })).emails).toEqual([
      { value: "a@work", type: "work", primary: true },
      { value: "h2" },
    ]);
    expect(applyPatch(base(), patch({ op: "add", path: 'emails[type eq "home"]', value: { display: "Home" } })).emails).toEqual([
      { value: "a@work", type: "work", primary: true },
      { value: "a@home", type: "home", display: "Home" },
    ]);
    expect(applyPatch(base(), patch({ op: "add", path: 'emails[type eq "other"].value', value: "o@x" })).emails).toEqual([
      ...base().emails,
      { type: "other", value: "o@x" },
    ]);
    expect(applyPatch(base(), patch({ op: "remove", path: 'emails[type eq "work"].primary' })).emails).toEqual([
      { value: "a@work", type: "work" },
      { value: "a@home", type: "home" },
    ]);
  });

  it("a new primary value takes the flag from the others", () => {
    expect(applyPatch(base(), patch({ op: "add", path: "emails", value: [{ value: "p@x", primary: true }] })).emails).toEqual([
      { value: "a@work", type: "work" },
      { value: "a@home", type: "home" },
      { value: "p@x", primary: true },
    ]);
    expect(applyPatch(base(), patch({ op: "replace", path: 'emails[type eq "home"].primary', value: true })).emails).toEqual([
      { value: "a@work", type: "work" },
      { value: "a@home", type: "home", primary: true },
    ]);
    expect(() => userFields({ ...base(), emails: [{ value: "a", primary: true }, { value: "b", primary: true }] })).toThrow(/at most one/);
  });

  it("refuses invalid operations with their scimType", () => {
    expect(scimType(() => applyPatch(base(), { Operations: [] }))).toBe("400 invalidValue");
    expect(scimType(() => applyPatch(base(), patch()))).toBe("400 invalidValue");
    expect(scimType(() => applyPatch(base(), patch({ op: "copy", path: "active", value: 1 })))).toBe("400 invalidValue");
    expect(scimType(() => applyPatch(base(), patch({ op: "replace", path: "meta.created", value: "x" })))).toBe("400 mutability");
    expect(scimType(() => applyPatch(base(), patch({ op: "replace", value: { schemas: [] } })))).toBe("400 mutability");
    expect(scimType(() => applyPatch(base(), patch({ op: "remove" })))).toBe("400 noTarget");
    expect(scimType(() => applyPatch(base(), patch({ op: "replace", path: 'emails[type eq "x"].value', value: "v" })))).toBe("400 noTarget");
    expect(scimType(() => applyPatch(base(), patch({ op: "replace", path: "a.b.c", value: 1 })))).toBe("400 invalidPath");
    expect(scimType(() => applyPatch(base(), patch({ op: "replace", path: "emails[type zz 1]", value: 1 })))).toBe("400 invalidPath");
    expect(scimType(() => applyPatch(base(), patch({ op: "replace", path: "active" })))).toBe("400 invalidValue");
  });
});

describe("userFields", () => {
  it("splits a User into columns and attributes, and derives the identity's name and email", () => {
    const fields = userFields({
      schemas: ["urn:ietf:params:scim:schemas:core:2.0:User"],
      id: "ignored",
      meta: { created: "x" },
      UserName: "Bob.Smith+ci@Example.com",
      externalId: "x1",
      emails: [{ value: "b@first" }, { value: "b@primary", primary: true }],
    });
    expect(fields).toEqual({
      userName: "Bob.Smith+ci@Example.com",
      externalId: "x1",
      active: undefined,
      attributes: { userName: "Bob.Smith+ci@Example.com", emails: [{ value: "b@first" }, { value: "b@primary", primary: true }] },
      name: "bob.smith-ci-example.com",
      email: "b@primary",
    });
    expect(userFields({ userName: "c", externalId: "x", emails: [{ value: "c@first" }] }).email).toBe("c@first");
  });

  it("requires userName and externalId, and a User schema when schemas are given", () => {
    expect(() => userFields({ externalId: "x" })).toThrow(/userName is required/);
    expect(() => userFields({ userName: "u" })).toThrow(/externalId is required/);
    expect(() => userFields({ userName: "u", externalId: "x", schemas: ["urn:other"] })).toThrow(/schemas must include/);
    expect(() => userFields([])).toThrow(/JSON object/);
  });
});
