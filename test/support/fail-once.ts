import { randomBytes } from "node:crypto";
import type { SqlClient } from "../../db/client.js";

/**
 * Makes the database refuse the first INSERT into `table` of a row whose `message_id` is
 * `messageId` (a trigger raising an error), then let every later one through: a write that fails
 * once, in the real Postgres, whatever statement or transaction it is part of. The count is a
 * sequence, which a rolled-back statement does not roll back. Returns the function that removes
 * the trigger.
 */
export async function failInsertOnce(
  sql: SqlClient,
  table: string,
  messageId: string,
): Promise<() => Promise<void>> {
  if (!/^[a-z_]+$/.test(table) || !/^[0-9a-f-]{36}$/.test(messageId)) throw new Error("bad arguments");
  const name = `fail_once_${randomBytes(6).toString("hex")}`;
  await sql.unsafe(`
    create sequence ${name};
    create function ${name}() returns trigger language plpgsql as $$
    begin
      if new.message_id = '${messageId}' and nextval('${name}') = 1 then
        raise exception 'injected failure: the first write to ${table} for this message';
      end if;
      return new;
    end $$;
    create trigger ${name} before insert on ${table} for each row execute function ${name}();
  `);
  return async () => {
    await sql.unsafe(`drop trigger ${name} on ${table}; drop function ${name}(); drop sequence ${name};`);
  };
}
