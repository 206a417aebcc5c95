import { afterAll, describe, expect, inject, it } from "vitest";
import { createDatabase } from "../../../db/client.js";
import { literal, runStatementPlannedEachTime, withLiterals } from "../../../src/store/statement.js";

/**
 * The statements planned at each call carry their values as literals in their text
 * (src/store/statement.ts): each value must reach Postgres as exactly itself, whatever it holds,
 * and a placeholder is one only outside strings, quoted names and comments. Checked against
 * Postgres itself, the only judge of what a literal means.
 */
const { sql } = createDatabase({ url: inject("databaseUrl"), poolSize: 1 });
afterAll(() => sql.end());

const HOSTILE = [
  "",
  "plain",
  "it's",
  "''",
  "\\",
  "\\'; select 1; --",
  "back\\slash\\\\twice",
  "line\nbreak\r\n",
  "$1 and $2",
  "$$ dollar $tag$",
  "-- not a comment",
  "/* nor this */",
  'a "quoted" name',
  "unicode: é ø 日本 🙂",
  "tab\tand\bcontrol\u0001",
];

describe("a value written as a literal", () => {
  it("given strings of every awkward kind, then Postgres reads back each one unchanged", async () => {
    for (const value of HOSTILE) {
      const [row] = await runStatementPlannedEachTime<Array<{ v: string }>>(sql, "select $1::text as v", [
        value,
      ]);
      expect(row?.v).toBe(value);
    }
  });

  it("given a string after a minus sign or a number below zero, then no comment is made of it", async () => {
    const [row] = await runStatementPlannedEachTime<Array<{ a: number; b: number }>>(
      sql,
      "select 10-$1 as a, 10 -$2 as b",
      [-3, 4],
    );
    expect(row).toEqual({ a: 13, b: 6 });
  });

  it("given numbers, booleans, null, a Date and arrays (empty, with nulls), then each arrives as itself", async () => {
    const at = new Date("2026-11-29T10:11:12.345Z");
    const ids = ["01890a5d-ac96-774b-bcce-b302099a8057", null];
    const [row] = await runStatementPlannedEachTime<
      Array<{
        n: number;
        f: number;
        t: boolean;
        z: null;
        d: string;
        ids: string;
        empty: number;
        texts: string[];
      }>
    >(
      sql,
      `select $1::int as n, $2::float8 as f, $3::boolean as t, $4::text as z,
        to_char($5::timestamptz at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS') as d,
        array_to_string($6::uuid[], ',', 'null') as ids, cardinality($7::uuid[]) as empty, $8::text[] as texts`,
      [42, 1.5e-7, true, null, at, ids, [], HOSTILE],
    );
    expect(row).toEqual({
      n: 42,
      f: 1.5e-7,
      t: true,
      z: null,
      d: "2026-11-29T10:11:12.345",
      ids: "01890a5d-ac96-774b-bcce-b302099a8057,null",
      empty: 0,
      texts: HOSTILE,
    });
  });

  it("given JSON with quotes, backslashes and newlines in its strings, then the same document arrives", async () => {
    const document = [{ error: 'can\'t "connect"\n\\ to $1', code: 503 }];
    const [row] = await runStatementPlannedEachTime<Array<{ v: unknown }>>(sql, "select $1::jsonb as v", [
      JSON.stringify(document),
    ]);
    expect(row?.v).toEqual(document);
  });
});

describe("the placeholders of a statement's text", () => {
  it("given $n inside a string, a quoted name or a comment, then it is left as written", () => {
    const text = `select '$1 it''s', "a$1" -- $1 here
      /* and $2 */ from t where x = $1 and y = $2`;
    expect(withLiterals(text, ["v", 7])).toBe(`select '$1 it''s', "a$1" -- $1 here
      /* and $2 */ from t where x = E'v' and y = 7`);
  });

  it("given a value that reads like a placeholder, then it is not filled in again", () => {
    expect(withLiterals("select $1, $2", ["$2", 1])).toBe("select E'$2', 1");
  });

  it("given too few values, a dollar-quoted string, or a value with no literal, then it refuses", () => {
    expect(() => withLiterals("select $1, $2", [1])).toThrow("no value for $2");
    expect(() => withLiterals("select $$text$$", [])).toThrow("dollar-quoted");
    expect(() => literal({ a: 1 })).toThrow(TypeError);
    expect(() => literal(Number.NaN)).toThrow(RangeError);
    expect(() => literal("nul\0")).toThrow(RangeError);
  });
});
