import { and, asc, eq, sql } from "drizzle-orm";
import type { Executor } from "../../../../db/client.js";
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

/** Every template of the organization, without content, by name in byte (ASCII) order. */
export async function listTemplates(db: Executor, organizationId: string): Promise<TemplateSummary[]> {
  return (
    db
      .select({ name: templates.name, createdAt: templates.createdAt, updatedAt: templates.updatedAt })
      .from(templates)
      .where(eq(templates.organizationId, organizationId))
      // "C": the same order whatever the database's collation, and the order clients sort in.
      .orderBy(asc(sql`${templates.name} collate "C"`))
  );
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
