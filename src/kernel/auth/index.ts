export * from "./principal.js";
export * from "./access.js";
export * from "./directory.js";
export * from "./scope-sql.js";
export * from "./keys.js";
export * from "./tokens.js";
export * from "./authenticator.js";
export * from "./interceptor.js";
