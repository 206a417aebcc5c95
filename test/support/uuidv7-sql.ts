/**
 * SQL for a random UUIDv7 of the instant `at` (an SQL expression of type timestamptz): its first
 * 48 bits are `at` in milliseconds, the rest a UUIDv4's, with the version nibble set to 7. For
 * tests that fill the tables in SQL: messages then land in the day partitions of their time, as
 * the service's own ids do (docs/decisions/0042), not all in the default partition. The
 * milliseconds are truncated, as a UUIDv7's are (`::bigint` alone rounds: an `at` in a day's last
 * half millisecond would land in the next day).
 */
export function uuidv7At(at: string): string {
  return `(lpad(to_hex(floor(extract(epoch from ${at}) * 1000)::bigint), 12, '0') || '7' || substr(replace(gen_random_uuid()::text, '-', ''), 14))::uuid`;
}
