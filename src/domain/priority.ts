/**
 * The spec's closed list of notification types, in the spec's own order. The order matters:
 * the design assigns tiers by position (first 15 critical, next 8 high, next 24 medium, last 24 low).
 */
export const NOTIFICATION_TYPES = [
  "OTP",
  "PASSWORD_RESET",
  "SECURITY_ALERT",
  "TRANSACTION_ALERT",
  "PAYMENT_CONFIRMATION",
  "FRAUD_ALERT",
  "TWO_FACTOR_AUTH_PROMPT",
  "CRITICAL_SYSTEM_OUTAGE",
  "DATA_BREACH_ALERT",
  "LEGAL_NOTICE_URGENT",
  "ACCOUNT_SUSPENSION",
  "UNRECOGNIZED_DEVICE_LOGIN",
  "MFA_FAILURE",
  "API_SECURITY_ALERT",
  "ACCOUNT_COMPROMISE_WARNING",
  "DEPENDENCY_FAILURE",
  "SUBSCRIPTION_OVERDRAFT_ALERT",
  "LICENSE_VIOLATION_ALERT",
  "LEGAL_COMPLIANCE_ALERT",
  "APPLICATION_PERFORMANCE_WARNING",
  "SLA_BREACH_NOTIFICATION",
  "SERVER_MAINTENANCE_ALERT",
  "HIGH_PRIORITY_SYSTEM_ALERT_FOR_ADMINS",
  "SUBSCRIPTION_RENEWAL_REMINDER",
  "BILLING_PAYMENT_DUE_REMINDER",
  "EVENT_REMINDER",
  "ACCOUNT_INACTIVITY_ALERT",
  "ACCOUNT_UPDATE_CONFIRMATION",
  "SESSION_TIMEOUT_WARNING",
  "QUOTA_STORAGE_LIMIT_WARNING",
  "SERVICE_PLAN_UPGRADE_SUGGESTION",
  "LICENSE_EXPIRATION_ALERT",
  "FRIEND_CONTACT_REQUEST",
  "INVITATION_ACCEPTANCE",
  "PENDING_APPROVAL_REQUEST",
  "PRIVACY_POLICY_UPDATE",
  "PRODUCT_SERVICE_UPDATE",
  "DOCUMENT_UPLOAD_VERIFICATION_REMINDER",
  "REVIEW_FEEDBACK_REQUEST",
  "THIRD_PARTY_INTEGRATION_FAILURE",
  "ACCOUNT_DOWNGRADE_WARNING",
  "JOB_COMPLETION_CONFIRMATION",
  "MODERATION_ALERT",
  "WORKFLOW_TRIGGER_ALERT",
  "TASK_ASSIGNMENT",
  "ACCOUNT_CONFIRMATION_EMAIL",
  "ACCOUNT_VERIFICATION_EMAIL",
  "NEWS_UPDATE",
  "MONTHLY_WEEKLY_SUMMARY",
  "COMMUNITY_ANNOUNCEMENTS",
  "PRODUCT_RECOMMENDATIONS",
  "CONTENT_RECOMMENDATIONS",
  "PERSONALIZED_OFFERS",
  "SURVEY_FEEDBACK_REQUEST",
  "SOCIAL_ENGAGEMENT_NOTIFICATIONS",
  "USER_ONBOARDING_WELCOME",
  "TUTORIALS_TIPS",
  "ANNIVERSARY_BIRTHDAY_GREETINGS",
  "HOLIDAY_GREETINGS",
  "ACCOUNT_MILESTONE_REMINDER",
  "SEASONAL_CONTENT_SUGGESTIONS",
  "EVENT_REGISTRATION_CONFIRMATION",
  "NEW_CONTENT_LAUNCH_ALERT",
  "REWARDS_PROGRAM_UPDATE",
  "RE_ENGAGEMENT_CAMPAIGNS",
  "CART_ABANDONMENT_REMINDER",
  "PRODUCT_BACK_IN_STOCK_ALERT",
  "DISCOUNTS_FOR_INACTIVE_USERS",
  "COMMUNITY_BASED_NEWS",
  "FITNESS_GOAL_REMINDERS",
  "JOB_SUGGESTIONS",
] as const;

export type NotificationType = (typeof NOTIFICATION_TYPES)[number];

export const PRIORITY_TIERS = ["critical", "high", "medium", "low"] as const;
export type PriorityTier = (typeof PRIORITY_TIERS)[number];

/** How many of the spec's types, in order, fall in each tier. */
const TIER_SIZES: Record<PriorityTier, number> = { critical: 15, high: 8, medium: 24, low: 24 };

const TIER_OF_TYPE: ReadonlyMap<NotificationType, PriorityTier> = (() => {
  const map = new Map<NotificationType, PriorityTier>();
  let index = 0;
  for (const tier of PRIORITY_TIERS) {
    for (let n = 0; n < TIER_SIZES[tier]; n++) {
      const type = NOTIFICATION_TYPES[index++];
      if (type) map.set(type, tier);
    }
  }
  return map;
})();

/** The tier of a notification type; no type means `medium`. */
export function tierOf(type: NotificationType | undefined): PriorityTier {
  if (type === undefined) return "medium";
  const tier = TIER_OF_TYPE.get(type);
  if (!tier) throw new Error(`unknown notification type ${type}`);
  return tier;
}

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

/** A message is never attempted or retried past its tier's time-to-live, counted from acceptance. */
export const TIME_TO_LIVE_MS: Record<PriorityTier, number> = {
  critical: 10 * MINUTE,
  high: HOUR,
  medium: 24 * HOUR,
  low: 24 * HOUR,
};

/** BullMQ priority (1 is taken first). */
export const QUEUE_PRIORITY: Record<PriorityTier, number> = { critical: 1, high: 2, medium: 3, low: 4 };
