import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["gen/**", "node_modules/**", "drizzle/**", ".data/**", "dist/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/consistent-type-imports": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
    },
  },
  {
    // An object literal's getter or setter makes a dictionary-mode object whose accessor keeps its closure,
    // and what the closure reaches, alive through V8's young-generation collections: made per request, every
    // request's objects were promoted (bench/README.md, change 24). A class's accessors live on its prototype.
    files: ["src/**/*.ts"],
    rules: {
      "no-restricted-syntax": [
        "error",
        {
          selector: "ObjectExpression > Property[kind=/^(get|set)$/]",
          message: "No getters or setters in object literals on the server: use a class (its accessors live on the prototype). See eslint.config.js.",
        },
      ],
    },
  },
);
