import { TemplateRenderError } from "../../src/channels/email/templates/render.js";

/** The TemplateRenderError `act` throws; fails the test if it throws nothing or something else. */
export function renderFailure(act: () => unknown): TemplateRenderError {
  try {
    act();
  } catch (err) {
    if (err instanceof TemplateRenderError) return err;
    throw err;
  }
  throw new Error("expected a TemplateRenderError");
}
