// The whole database schema, one file per domain. drizzle-kit reads this to generate migrations.
export * from "./server.js";
export * from "./iam.js";
export * from "./registry.js";
export * from "./outbox.js";
export * from "./events.js";
export * from "./account-associations.js";
export * from "./refresh-tokens.js";
export * from "./terms.js";
export * from "./invites.js";
export * from "./libraries.js";
export * from "./advisories.js";
