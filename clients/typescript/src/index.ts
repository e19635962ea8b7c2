// @raptor/client: the typed client of the Raptor API (types generated from its OpenAPI document)
// and the helpers every caller needs: the retry rule (`withRetries`), paging (`pages`), the
// trade-updates stream that resumes where it left off (`tradeUpdates`) and enum types that accept
// values a newer server adds.

export * from "./sdk.js";
export type { components, operations, paths } from "./schema.js";
