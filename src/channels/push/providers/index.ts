import type { Config } from "../../../runtime/config.js";
import { providerFactory, requiredSettings } from "../../providers/factory.js";
import type { PushMessage } from "./provider.js";
import { SimulatorPushProvider } from "./simulator.js";
import { WebPushProvider } from "./webpush.js";

/** The provider `PUSH_PROVIDER` names. */
export const createPushProvider = providerFactory<Config, "PUSH_PROVIDER", PushMessage>(
  "PUSH_PROVIDER",
  SimulatorPushProvider,
  {
    webpush(config, chosen) {
      const [vapidPublicKey, vapidPrivateKey] = requiredSettings(
        config,
        ["VAPID_PUBLIC_KEY", "VAPID_PRIVATE_KEY"],
        chosen,
      );
      return new WebPushProvider({
        vapidPublicKey,
        vapidPrivateKey,
        vapidSubject: config.VAPID_SUBJECT,
        timeoutMs: config.PUSH_TIMEOUT_MS,
        allowedHosts: config.PUSH_ENDPOINT_HOSTS,
        allowedNetworks: config.OUTBOUND_ALLOWED_NETWORKS,
      });
    },
  },
);
