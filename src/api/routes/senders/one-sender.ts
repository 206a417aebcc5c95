import { z } from "zod";
import { SENDER_KINDS, SENDER_STATUSES, verificationRecordName } from "../../../domain/senders.js";
import { ApiError } from "../../../http/errors.js";
import {
  API_KEY_ERRORS,
  type ErrorStatus,
  errorResponses,
  JSON_BODY_ERRORS,
  oneByIdErrors,
  SERVER_ERRORS,
} from "../../../http/openapi.js";
import type { Sender } from "../../../store/senders.js";
import type { AppDeps } from "../../types.js";
import { uuidParam } from "../../wire/common-schemas.js";

/**
 * What the sender routes share: the record they answer with, the `{id}` parameter, the 404 of a
 * sender the key's organization does not have (docs/decisions/0033).
 */

export const senderIdParams = z.object({ id: uuidParam("id") });

const dnsTxtVerification = z
  .object({
    method: z.literal("dns_txt"),
    record: z.object({
      type: z.literal("TXT"),
      name: z.string().meta({ example: "_notify-verification.example.com" }),
      value: z.string().meta({ example: "ntf-verify=3q2-7wAAAAB0aGlzIGlzIG5vdCBhIHJlYWw" }),
    }),
  })
  .meta({ description: "Publish this TXT record in the domain's DNS, then ask for the check (`…/verify`)" });

const operatorReview = z
  .object({ method: z.literal("operator_review") })
  .meta({ description: "An operator of the service approves the sender id (the sender's `status` tells)" });

export const senderRecord = z
  .object({
    id: z.uuid(),
    kind: z.enum(SENDER_KINDS),
    value: z.string().meta({ description: "The domain (lower case), or the SMS sender as sends name it" }),
    status: z.enum(SENDER_STATUSES),
    created_at: z.iso.datetime(),
    verified_at: z.iso.datetime().nullable(),
    verification: z.discriminatedUnion("method", [dnsTxtVerification, operatorReview]),
  })
  .meta({ id: "Sender" });

export function toSenderRecord(sender: Sender): z.output<typeof senderRecord> {
  return {
    id: sender.id,
    kind: sender.kind,
    value: sender.value,
    status: sender.status,
    created_at: sender.createdAt.toISOString(),
    verified_at: sender.verifiedAt?.toISOString() ?? null,
    verification:
      sender.kind === "email_domain" && sender.verificationToken !== null
        ? {
            method: "dns_txt",
            record: {
              type: "TXT",
              name: verificationRecordName(sender.value),
              value: sender.verificationToken,
            },
          }
        : { method: "operator_review" },
  };
}

/** Another organization's sender is indistinguishable from an unknown one. */
export function noSuchSender(): ApiError {
  return new ApiError(404, "Sender not found");
}

/** The error responses of a route naming one sender; `others` add to them or say more. */
export function oneSenderErrors(...others: Partial<Record<ErrorStatus, string>>[]) {
  return oneByIdErrors("sender", ...others);
}

/** The error responses of a route registering a sender. */
export function registerErrors(badRequest: string) {
  return errorResponses(
    { 400: badRequest },
    API_KEY_ERRORS,
    { 409: "The organization has already registered it, or has `SENDER_MAX_PER_ORGANIZATION` senders" },
    JSON_BODY_ERRORS,
    SERVER_ERRORS,
  );
}

/** What registering a sender needs of the app: its store, clock, ids and the cap. */
export function senderDeps(deps: AppDeps) {
  return { ...deps, maxSenders: deps.config.SENDER_MAX_PER_ORGANIZATION };
}

/** The 409 of an organization at its cap of senders. */
export function tooManySenders(max: number): ApiError {
  return new ApiError(
    409,
    `This organization has ${max} senders, the most it may have (SENDER_MAX_PER_ORGANIZATION); delete one it no longer uses`,
  );
}
