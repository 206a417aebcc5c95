import type { SqlClient } from "../../db/client.js";

/**
 * Runs a statement whose text the store built once, at module load, from its column lists, with
 * `$1`, `$2`… for the values. postgres.js prepares it once per connection, as it does a tagged
 * template. (A tagged template that splices the column lists in as `sql.unsafe` fragments would
 * rebuild the statement on every call, which the hot paths pay for in CPU and latency.)
 */
export function runStatement<T extends object[]>(
  sql: SqlClient,
  text: string,
  values: readonly unknown[],
): Promise<T> {
  return sql.unsafe<T>(text, values as never[], { prepare: true }) as unknown as Promise<T>;
}

/**
 * Runs a statement on a table used as a queue, whose size swings from empty to tens of thousands
 * of rows within seconds (the delivery outbox) or to millions (the scheduled sends), planned anew
 * at every call: an unnamed statement, which Postgres plans with its values and the table's size
 * now. A plan Postgres made and kept while the table was empty, a sequential scan and a sort, is
 * still run once the table has filled, until the next analyze, and reads every row at every call
 * (docs/decisions/0047; test/integration/workers/queue-table-plans.test.ts). The values are
 * written into the text as literals ({@link withLiterals}): postgres.js sends an unnamed statement
 * with parameters in two round trips (it asks for the parameters' types before it binds them),
 * and one without in a single write and round trip. The price: the parsing and planning at every
 * call (tens of microseconds for a simple statement, 0.3 ms for the webhook claim's lease).
 */
export function runStatementPlannedEachTime<T extends object[]>(
  sql: SqlClient,
  text: string,
  values: readonly unknown[],
): Promise<T> {
  return sql.unsafe<T>(withLiterals(text, values), [], { prepare: false }) as unknown as Promise<T>;
}

/** A statement's text cut at its placeholders: text, then the 0-based index of a value, and so on. */
type Template = Array<string | number>;
const templates = new Map<string, Template>();

/**
 * `text` with each placeholder `$n` outside its strings, quoted names and comments replaced by the
 * literal of `values[n - 1]` ({@link literal}); every value must be used. For the store's own
 * statement texts, written once as constants (each is cut once and kept). What the cut cannot
 * read for sure is refused: an escape string (`E'…'`, where a quote may be escaped), a nested
 * comment, a dollar-quoted string, a `$` in a name, `$0`.
 */
export function withLiterals(text: string, values: readonly unknown[]): string {
  let template = templates.get(text);
  if (!template) {
    template = cut(text);
    templates.set(text, template);
  }
  const used = new Set<number>();
  let out = "";
  for (const part of template) {
    if (typeof part === "string") out += part;
    else if (part < values.length) {
      out += literal(values[part]);
      used.add(part);
    } else throw new RangeError(`no value for $${part + 1}`);
  }
  if (used.size !== values.length) throw new RangeError(`${values.length - used.size} value(s) not used`);
  return out;
}

function cut(text: string): Template {
  const parts: Template = [];
  let from = 0;
  let i = 0;
  const skipTo = (end: string, at: number) => {
    const found = text.indexOf(end, at);
    return found < 0 ? text.length : found + end.length;
  };
  while (i < text.length) {
    const c = text[i] ?? "";
    const next = text[i + 1] ?? "";
    const before = text[i - 1] ?? "";
    if (c === "'" && /[A-Za-z0-9_$]/.test(before)) {
      throw new Error("an escape or prefixed string in a statement planned each time");
    } else if (c === "'" || c === '"') {
      // A quote inside is doubled: the string goes on after it.
      i = skipTo(c, i + 1);
      while (text[i] === c) i = skipTo(c, i + 1);
    } else if (c === "-" && next === "-") i = skipTo("\n", i + 2);
    else if (c === "/" && next === "*") {
      const end = skipTo("*/", i + 2);
      if (text.slice(i + 2, end).includes("/*"))
        throw new Error("a nested comment in a statement planned each time");
      i = end;
    } else if (c === "$") {
      const digits = /^[0-9]+/.exec(text.slice(i + 1))?.[0] ?? "";
      if (!digits || Number(digits) === 0 || /[A-Za-z0-9_]/.test(before)) {
        throw new Error("a $ other than a placeholder in a statement planned each time");
      }
      parts.push(text.slice(from, i), Number(digits) - 1);
      i += 1 + digits.length;
      from = i;
    } else i++;
  }
  parts.push(text.slice(from));
  return parts;
}

/**
 * A value as a SQL literal: null, a finite number (a negative one in parentheses: after a minus
 * it must not make a comment), a string (an escape string: every backslash and quote doubled, so
 * it means the same whatever `standard_conforming_strings` says), or an array of those
 * (`ARRAY[…]`: the statement casts it, as it would a parameter). Anything else is refused, and
 * `undefined` too (postgres.js refuses it as a parameter): JSON and times go in as text.
 */
export function literal(value: unknown): string {
  if (value === null) return "NULL";
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new RangeError(`not a finite number: ${value}`);
    return value < 0 ? `(${value})` : String(value);
  }
  if (typeof value === "string") {
    if (value.includes("\0")) throw new RangeError("a Postgres string cannot hold a NUL");
    return `E'${value.replaceAll("\\", "\\\\").replaceAll("'", "''")}'`;
  }
  if (Array.isArray(value)) return `ARRAY[${value.map(literal).join(",")}]`;
  throw new TypeError(
    `no SQL literal for ${value === undefined ? "undefined" : Object.prototype.toString.call(value)}`,
  );
}
