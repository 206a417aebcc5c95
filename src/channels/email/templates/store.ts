import { and, asc, eq, sql } from "drizzle-orm";
import type { Database, Executor } from "../../../../db/client.js";
import { templates } from "../../../../db/schema.js";

/** An organization's e-mail template as stored. */
export interface Template {
  name: string;
  code: string;
  /** The plain-text part; null when it is to be derived from the rendered HTML. */
  text: string | null;
  createdAt: Date;
  updatedAt: Date;
}

export type TemplateSummary = Omit<Template, "code" | "text">;

const columns = {
  name: templates.name,
  code: templates.code,
  text: templates.text,
  createdAt: templates.createdAt,
  updatedAt: templates.updatedAt,
};

const ofTemplate = (organizationId: string, name: string) =>
  and(eq(templates.organizationId, organizationId), eq(templates.name, name));

/**
 * Stores a new template. Returns undefined when the organization already has one of that name:
 * the primary key decides, so of concurrent creates exactly one succeeds.
 */
export async function createTemplate(
  db: Executor,
  organizationId: string,
  template: { name: string; code: string; text: string | null },
  now: Date,
): Promise<Template | undefined> {
  const [created] = await db
    .insert(templates)
    .values({ organizationId, ...template, createdAt: now, updatedAt: now })
    .onConflictDoNothing({ target: [templates.organizationId, templates.name] })
    .returning(columns);
  return created;
}

/** The organization's template of that name; another organization's is not found. */
export async function findTemplate(
  db: Executor,
  organizationId: string,
  name: string,
): Promise<Template | undefined> {
  const [found] = await db.select(columns).from(templates).where(ofTemplate(organizationId, name)).limit(1);
  return found;
}

/**
 * Stores a new template unless the organization already has `max` of them. The check and the
 * insert run under a lock of the organization's templates (a transaction-scoped advisory lock), so
 * concurrent creates never pass the limit together.
 */
export async function createTemplateWithinLimit(
  db: Database,
  organizationId: string,
  template: { name: string; code: string; text: string | null },
  now: Date,
  max: number,
): Promise<{ created: Template } | "exists" | "limit_reached"> {
  return db.transaction(async (tx) => {
    await tx.execute(
      sql`select pg_advisory_xact_lock(hashtextextended(${`templates:${organizationId}`}, 0))`,
    );
    const [counted] = await tx
      .select({ count: sql<number>`count(*)::int` })
      .from(templates)
      .where(eq(templates.organizationId, organizationId));
    if ((counted?.count ?? 0) >= max) return "limit_reached";
    const created = await createTemplate(tx, organizationId, template, now);
    return created ? { created } : "exists";
  });
}

/**
 * A page of the organization's templates, without content, by name in byte (ASCII) order,
 * starting after the name `after`. `next` is the last name of the page when more follow.
 */
export async function listTemplates(
  db: Executor,
  organizationId: string,
  page: { limit: number; after?: string | undefined },
): Promise<{ rows: TemplateSummary[]; next: string | null }> {
  // "C": the same order whatever the database's collation, and the order clients sort in.
  const byName = sql`${templates.name} collate "C"`;
  const rows = await db
    .select({ name: templates.name, createdAt: templates.createdAt, updatedAt: templates.updatedAt })
    .from(templates)
    .where(
      and(
        eq(templates.organizationId, organizationId),
        page.after === undefined ? undefined : sql`${byName} > ${page.after}`,
      ),
    )
    .orderBy(asc(byName))
    .limit(page.limit + 1);
  const shown = rows.slice(0, page.limit);
  return { rows: shown, next: rows.length > page.limit ? (shown.at(-1)?.name ?? null) : null };
}

/** Replaces a template's code and text. Returns undefined when the organization has no such template. */
export async function updateTemplate(
  db: Executor,
  organizationId: string,
  name: string,
  content: { code: string; text: string | null },
  now: Date,
): Promise<Template | undefined> {
  const [updated] = await db
    .update(templates)
    .set({ ...content, updatedAt: now })
    .where(ofTemplate(organizationId, name))
    .returning(columns);
  return updated;
}

/** Deletes a template. Returns false when the organization has no such template. */
export async function deleteTemplate(db: Executor, organizationId: string, name: string): Promise<boolean> {
  const deleted = await db
    .delete(templates)
    .where(ofTemplate(organizationId, name))
    .returning({ name: templates.name });
  return deleted.length > 0;
}
