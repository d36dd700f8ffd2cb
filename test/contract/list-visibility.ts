// The visibility cases every list of per-organization resources shares, written once: a viewer bound on the
// team sees what lies in the team only; a uidp filter reaching outside the caller's scope returns and counts
// nothing of what lies outside; a caller with no bindings sees nothing, with a total of 0. Each compares
// uids (in any order) and the total_count.
import type { DescMessage, DescMethodUnary, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import { expect } from "vitest";
import type { World } from "../support/world.js";
import { contractCase, type ContractCase } from "./harness.js";

type Uids = () => readonly string[];

export interface ListVisibility<I extends DescMessage, O extends DescMessage> {
  method: DescMethodUnary<I, O>;
  /** The resource in the plural, for the cases' names ("repos"). */
  noun: string;
  /** The world the callers belong to (read when the tests run). */
  world: () => World;
  /** The listed resources of a response. */
  items: (response: MessageShape<O>) => readonly { uid: string }[];
  /** What the team's viewer lists. */
  teamViewer: Uids;
  /** A filter reaching outside the scope of the other group's viewer, and what it lists (where the list has one). */
  outside?: { request: () => MessageInitShape<I>; uids: Uids };
}

export function listVisibilityCases<I extends DescMessage, O extends DescMessage>(v: ListVisibility<I, O>): ContractCase[] {
  const lists = (uids: Uids) => (r: MessageShape<O>) => {
    expect(v.items(r).map((x) => x.uid).sort()).toEqual([...uids()].sort());
    expect((r as { totalCount?: bigint }).totalCount).toBe(BigInt(uids().length));
  };
  return [
    contractCase({
      name: `a viewer bound on team sees the team's ${v.noun} only`,
      method: v.method,
      request: {} as MessageInitShape<I>,
      headers: () => v.world().auth("teamViewer"),
      response: lists(v.teamViewer),
    }),
    ...(v.outside
      ? [
          contractCase({
            name: `a filter naming ${v.noun} outside the caller's scope returns and counts nothing of them`,
            method: v.method,
            request: v.outside.request,
            headers: () => v.world().auth("otherViewer"),
            response: lists(v.outside.uids),
          }),
        ]
      : []),
    contractCase({
      name: "a caller with no bindings sees nothing, and a total of 0",
      method: v.method,
      request: {} as MessageInitShape<I>,
      headers: () => v.world().auth("stranger"),
      response: lists(() => []),
    }),
  ];
}
