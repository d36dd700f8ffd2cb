export * from "./builders.js";
export * from "./boundary.js";
export * from "./public.js";
export * from "./http.js";
export * from "./sqlstate.js";
