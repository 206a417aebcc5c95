import { z } from "zod";

/** An organization as the API shows it, for the OpenAPI document. */
export const organizationRecord = z
  .object({ active: z.boolean(), id: z.uuid(), name: z.string(), product_id: z.string() })
  .meta({ id: "Organization" });

/** An organization just onboarded: the record and its API key, shown this once. */
export const createdOrganization = organizationRecord
  .extend({ apiKey: z.string().meta({ description: "`ntf_…`: shown once; only its SHA-256 is stored" }) })
  .meta({ id: "CreatedOrganization" });
