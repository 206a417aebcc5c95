/**
 * Which folder may import which: the arrows point one way, from the entry points down to the
 * pure domain: domain ← db ← channels ← store ← use cases (src/messages) ← the API and the
 * worker, with src/runtime and src/http as toolkits beside them (docs/decisions/0023). `npm run
 * lint` runs it over src, workers, db and scripts; a forbidden import fails the lint with the
 * rule's name and comment.
 *
 * The rules name only the project's own folders, except `domain-is-pure`, which also keeps
 * packages and Node's modules out of the domain. Type-only imports count: a type that points the
 * wrong way ties the layers together as much as a value does.
 */

/** Every path the project's own code lives under (the rest is packages and Node's modules). */
const PROJECT = "^(src|workers|db|scripts|test|bench)/";

/** The channels' content types: plain data the domain's events carry, with no behaviour. */
const CHANNEL_CONTENT = "^src/channels/[^/]+/content\\.ts$";

/** Code only a sending process needs: each channel's providers, their shared helpers, the factory. */
const PROVIDER_CODE = "^src/channels/(providers/|[^/]+/providers/)";

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "no-circular",
      severity: "error",
      comment:
        "No import cycles: a cycle makes two modules one (neither can be understood, tested or " +
        "loaded without the other) and usually means an import runs back up a layer.",
      from: {},
      to: { circular: true },
    },
    {
      name: "domain-is-pure",
      severity: "error",
      comment:
        "src/domain holds the events, state, evolve and decide: pure functions of their inputs. " +
        "It imports only itself: no channel, store, HTTP, worker, package or Node module, so it " +
        "runs and is tested alone. (Each channel declares the content its messages carry in its " +
        "own content.ts, by augmenting the domain's ChannelContents interface.)",
      from: { path: "^src/domain/" },
      to: { pathNot: "^src/domain/" },
    },
    {
      name: "channel-content-is-pure",
      severity: "error",
      comment:
        "A channel's content.ts declares what the pure domain's events carry, so it must be as " +
        "pure: it may import the domain and other content types, nothing else of the project's.",
      from: { path: CHANNEL_CONTENT },
      to: { path: PROJECT, pathNot: ["^src/domain/", CHANNEL_CONTENT] },
    },
    {
      name: "db-below-everything-but-the-domain",
      severity: "error",
      comment:
        "db/ (the schema, the client, migrations, Postgres error checks) is the bottom layer with " +
        "the domain: it may use the domain's lists and types, and nothing above it.",
      from: { path: "^db/" },
      to: { path: PROJECT, pathNot: ["^db/", "^src/domain/"] },
    },
    {
      name: "runtime-stands-alone",
      severity: "error",
      comment:
        "src/runtime (config, logger, lifecycle, Redis, API-key hashing) is process plumbing every " +
        "entry point uses; it imports only itself, so using it never pulls in a layer.",
      from: { path: "^src/runtime/" },
      to: { path: PROJECT, pathNot: "^src/runtime/" },
    },
    {
      name: "store-below-use-cases-and-entry-points",
      severity: "error",
      comment:
        "src/store (events, records, queues, batching) sits under the use cases and the entry " +
        "points: it must not import the API, the use cases (src/messages), the onboarding app or " +
        "the worker.",
      from: { path: "^src/store/" },
      to: { path: "^(src/api/|src/messages/|src/client-onboarding/|workers/)" },
    },
    {
      name: "channels-below-use-cases-and-entry-points",
      severity: "error",
      comment:
        "A channel (its schema, content, preparation, providers) is used by the routes, the use " +
        "cases and the worker; it must not import them, the onboarding app or the store.",
      from: { path: "^src/channels/" },
      to: { path: "^(src/api/|src/messages/|src/store/|src/client-onboarding/|workers/)" },
    },
    {
      name: "use-cases-below-entry-points",
      severity: "error",
      comment:
        "src/messages holds the use cases the entry points call; it must not import the API, the " +
        "worker or the onboarding app (an HTTP or queue detail it needs comes in as an argument).",
      from: { path: "^src/messages/" },
      to: { path: "^(src/api/|src/client-onboarding/|workers/)" },
    },
    {
      name: "no-entry-points-tests-or-tools-from-src",
      severity: "error",
      comment:
        "Nothing in src/ or db/ imports the worker, the tests, the benchmark or the scripts: they " +
        "are entry points and tools built on src/ and db/, never part of them.",
      from: { path: "^(src|db)/" },
      to: { path: "^(workers|test|bench|scripts)/" },
    },
    {
      name: "web-process-loads-no-provider",
      severity: "error",
      comment:
        "The API process only accepts and reads messages; sending is the worker's. Outside the " +
        "provider code itself (a channel's providers/, the shared provider helpers), nothing in " +
        "src/ loads provider code when it is loaded: a channel reaches its providers through a " +
        "dynamic import() in createProvider, which only the worker calls, and a type-only import " +
        "loads nothing. So Twilio, SMTP, Web Push and their packages stay out of the web process " +
        "(test/unit/channels/channels.test.ts follows the API's static imports to check the same).",
      from: { path: "^src/", pathNot: PROVIDER_CODE },
      to: { path: PROVIDER_CODE, dependencyTypesNot: ["dynamic-import", "type-only"] },
    },
    {
      name: "http-helpers-are-generic",
      severity: "error",
      comment:
        "src/http holds what any Hono app of ours shares: the error type and the one error " +
        "handler, the JSON body reader, body limits, the request id, OpenAPI routes and /docs. " +
        "Both the notification API and the client-onboarding app use it, so it knows neither: " +
        "it imports only itself and db/errors.ts (a database that cannot answer is a 503).",
      from: { path: "^src/http/" },
      to: { path: PROJECT, pathNot: ["^src/http/", "^db/errors\\.ts$"] },
    },
    {
      name: "onboarding-shares-nothing-with-the-api",
      severity: "error",
      comment:
        "The client-onboarding app is a second service with its own process: it shares the " +
        "generic HTTP helpers of src/http with the notification API, never the API's routes, " +
        "auth, wire formats or use cases.",
      from: { path: "^src/client-onboarding/" },
      to: { path: "^src/api/" },
    },
    {
      name: "onboarding-loads-no-notification-code",
      severity: "error",
      comment:
        "Nor may the onboarding app reach the notification service's own code through those " +
        "helpers or anything else: no store, use case, channel or metrics module may be " +
        "loaded by it, directly or down any chain of imports (the domain's lists reach it through " +
        "db/schema.ts, whose columns they type).",
      from: { path: "^src/client-onboarding/" },
      to: {
        path: "^(src/(store|messages|channels|observability)/|workers/)",
        reachable: true,
      },
    },
    {
      name: "worker-is-not-a-web-app",
      severity: "error",
      comment:
        "workers/ is the delivery process: it must not import the notification API or the " +
        "onboarding app (and so load their routes); what both need lives in a lower layer.",
      from: { path: "^workers/" },
      to: { path: "^(src/api/|src/client-onboarding/)" },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsConfig: { fileName: "tsconfig.json" },
    tsPreCompilationDeps: true,
  },
};
