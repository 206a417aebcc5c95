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
  "х\\ and х' and ソ\\'",
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

  it("given a lone surrogate, then it arrives as the replacement character, as a parameter's would", async () => {
    const [row] = await runStatementPlannedEachTime<Array<{ v: string }>>(sql, "select $1::text as v", [
      "a\ud800b",
    ]);
    expect(row?.v).toBe("a\ufffdb");
  });

  it("given negative numbers after a minus sign, then no comment is made of them", async () => {
    const [row] = await runStatementPlannedEachTime<Array<{ a: number; b: number }>>(
      sql,
      "select 10-$1 as a, 10 -$2 as b",
      [-3, -4],
    );
    expect(row).toEqual({ a: 13, b: 14 });
  });

  it("given numbers of every size and sign, then each arrives as itself", async () => {
    const numbers = [0, -0, 1, -1, 2 ** 53, 1e21, 1.5e-7, -2.5, 5e-324];
    const [row] = await runStatementPlannedEachTime<Array<{ v: number[] }>>(sql, "select $1::float8[] as v", [
      numbers,
    ]);
    expect(row?.v).toEqual(numbers.map((n) => (Object.is(n, -0) ? 0 : n)));
  });

  it("given null, numbers, an ISO time and arrays (empty, with nulls), then each arrives as itself", async () => {
    const ids = ["01890a5d-ac96-774b-bcce-b302099a8057", null];
    const [row] = await runStatementPlannedEachTime<
      Array<{ n: number; z: null; d: string; ids: string; empty: number; texts: string[] }>
    >(
      sql,
      `select $1::int as n, $2::text as z,
        to_char($3::timestamptz at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS') as d,
        array_to_string($4::uuid[], ',', 'null') as ids, cardinality($5::uuid[]) as empty, $6::text[] as texts`,
      [42, null, "2026-11-29T10:11:12.345Z", ids, [], HOSTILE],
    );
    expect(row).toEqual({
      n: 42,
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

  it("given what the cut cannot read for sure, then it refuses the text", () => {
    expect(() => withLiterals("select $1, $2", [1])).toThrow("no value for $2");
    expect(() => withLiterals("select $1", [1, 2])).toThrow("not used");
    expect(() => withLiterals("select $0", [1])).toThrow("other than a placeholder");
    expect(() => withLiterals("select foo$1", [1])).toThrow("other than a placeholder");
    expect(() => withLiterals("select $$text$$", [])).toThrow("other than a placeholder");
    expect(() => withLiterals("select E'it\\'s $1'", [1])).toThrow("escape or prefixed string");
    expect(() => withLiterals("select /* a /* b */ $1 */", [1])).toThrow("nested comment");
  });

  it("given $10 beside $1, then each gets its own value", () => {
    const values = Array.from({ length: 10 }, (_, i) => i + 1);
    expect(withLiterals("select $1, $10, $2, $3, $4, $5, $6, $7, $8, $9", values)).toBe(
      "select 1, 10, 2, 3, 4, 5, 6, 7, 8, 9",
    );
  });

  it("given a value with no literal, then it refuses it, undefined included", () => {
    expect(() => literal(undefined)).toThrow(TypeError);
    expect(() => literal([1, undefined])).toThrow(TypeError);
    expect(() => literal({ a: 1 })).toThrow(TypeError);
    expect(() => literal(new Date())).toThrow(TypeError);
    expect(() => literal(true)).toThrow(TypeError);
    expect(() => literal(Number.NaN)).toThrow(RangeError);
    expect(() => literal("nul\0")).toThrow(RangeError);
  });
});
