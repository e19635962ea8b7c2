// What the journey knows about the contract, at compile time (types generated from
// openapi/openapi.json into schema.ts) and at run time (the document the server serves).

import type { Middleware } from "openapi-fetch";
import type { components, paths } from "./schema.js";

export type Schemas = components["schemas"];
export type OrderResponse = Schemas["OrderResponse"];
export type OrderStatus = Schemas["OrderStatus"];
export type PositionSide = Schemas["PositionSide"];

/** Methods openapi-fetch calls operations by. */
export type Method = "get" | "put" | "post" | "delete" | "patch";

/** The operation at `P` and `M` (never when the document has none). */
type Operation<P extends keyof paths, M extends Method> = paths[P][M] extends infer O
  ? O extends { responses: unknown }
    ? O
    : never
  : never;

/** Response objects of an operation, by status. */
export type Responses<P extends keyof paths, M extends Method> = Operation<P, M>["responses"];

/** The statuses the document declares for an operation. */
export type DeclaredStatus<P extends keyof paths, M extends Method> = keyof Responses<P, M> & number;

/** Every error code (the document's one `ErrorCode` enum). Which codes an operation answers
 * with each status is documentation (`x-error-codes` on the response), checked at run time by
 * `contractCheck`. */
export type ErrorCode = Schemas["ErrorCode"];

/** The `retry` member every error body carries (the one retry rule). */
export type Retry = Schemas["Retry"];

/** What a client does after an error: the body's `retry`, refined for the app (sign in again, a
 * client bug), per docs/api.md's retry recipe. */
export type Advice =
  | "retry_same_key" // the operation may still happen: same key, same body, after a wait
  | "final" // the outcome of this operation: stop, drop the key
  | "new_key" // the key is spent without the operation happening: a new operation needs a new key
  | "sign_in" // the session is gone
  | "client_bug"; // the request was malformed: fix the client

/**
 * Exhaustive over the codes: a code the document adds or drops fails compilation here, and a
 * code the server answers that the document does not declare fails the run.
 */
export function retryAdvice(code: ErrorCode): Advice {
  switch (code) {
    case "idempotency_in_flight":
    case "database_busy":
    case "database_unavailable":
    case "idempotency_store_unavailable":
    case "request_timeout":
    case "billing_busy":
    case "stripe_unavailable":
    case "stripe_timeout":
    case "rate_limited":
    case "too_many_connections":
      return "retry_same_key";
    case "idempotency_previous_failed":
    case "idempotency_key_body_mismatch":
    case "internal":
      return "new_key";
    case "unauthenticated":
    case "invalid_token":
      return "sign_in";
    case "bad_request":
    case "method_not_allowed":
    case "invalid_json":
    case "invalid_body":
    case "invalid_path":
    case "invalid_query":
    case "Idempotency-Key must be a UUID string":
    case "idempotency_key_required":
    case "unsupported_media_type":
    case "payload_too_large":
    case "request_headers_too_large":
    case "invalid_payload":
    case "invalid_signature":
      return "client_bug";
    case "billing_not_configured":
    case "new_orders_disabled":
    case "billing_request_rejected":
    case "contract_expired":
    case "duplicate_client_order_id":
    case "duplicate_reset":
    case "forbidden":
    case "insufficient_buying_power":
    case "insufficient_qty":
    case "invalid_billing_request":
    case "invalid_display_name":
    case "invalid_email":
    case "invalid_marketing_opt_in":
    case "invalid_order":
    case "invalid_quote":
    case "invalid_subscription":
    case "invalid_symbol":
    case "invalid_time_zone":
    case "live_trading_unavailable":
    case "not_found":
    case "order_not_cancelable":
    case "quote_unavailable":
    case "stream_history_gone":
    case "subscription_active":
    case "too_many_open_orders":
    case "uncovered_short_option":
      return "final";
    default: {
      const _never: never = code;
      throw new ContractError(`error code ${JSON.stringify(_never)} is not in the document`);
    }
  }
}

/** The `retry` value the server must send with a code of this advice. */
export function wireRetry(advice: Advice): Retry {
  switch (advice) {
    case "retry_same_key":
      return "same_key";
    case "new_key":
      return "new_key";
    case "final":
    case "sign_in":
    case "client_bug":
      return "no";
  }
}

/** Exhaustive over order statuses: a status the document adds fails compilation, a status the
 * server answers that the document lacks fails the run. */
export function isOpen(status: OrderStatus): boolean {
  switch (status) {
    case "new":
      return true;
    case "filled":
    case "canceled":
    case "expired":
      return false;
    default: {
      const _never: never = status;
      throw new ContractError(`order status ${JSON.stringify(_never)} is not in the document`);
    }
  }
}

/** Exhaustive over position sides (the document has no `flat`: flat positions are not listed). */
export function signOf(side: PositionSide): -1 | 1 {
  switch (side) {
    case "long":
      return 1;
    case "short":
      return -1;
    default: {
      const _never: never = side;
      throw new ContractError(`position side ${JSON.stringify(_never)} is not in the document`);
    }
  }
}

/** A broken contract: the server answered something the document does not declare. */
export class ContractError extends Error {
  override name = "ContractError";
}

// ---- Run time: the served document ----------------------------------------------------------

interface ResponseObject {
  content?: Record<string, unknown>;
  "x-error-codes"?: string[];
}
interface OperationObject {
  responses?: Record<string, ResponseObject>;
}
export interface OpenApiDocument {
  paths: Record<string, Record<string, OperationObject>>;
}

/** One checked response, for the coverage summary. */
export interface Seen {
  operation: string;
  status: number;
}

/**
 * A middleware that fails every response the document does not declare: its status for the
 * operation, its media type for that status, and (for an error) its `error` code: one of the
 * codes the response lists in `x-error-codes`.
 */
export function contractCheck(doc: OpenApiDocument, seen: Seen[]): Middleware {
  return {
    async onResponse({ request, response, schemaPath }) {
      const method = request.method.toLowerCase();
      const operation = `${request.method} ${schemaPath}`;
      const declared = doc.paths[schemaPath]?.[method]?.responses;
      if (!declared) throw new ContractError(`${operation} is not in the document`);
      const status = String(response.status);
      const object = declared[status] ?? declared[`${status[0]}XX`] ?? declared["default"];
      if (!object) {
        const body = await response.clone().text();
        throw new ContractError(
          `${operation} answered ${status}, which the document does not declare ` +
            `(declared: ${Object.keys(declared).join(", ")}): ${body.slice(0, 300)}`,
        );
      }
      const contentType = (response.headers.get("content-type") ?? "").split(";")[0]!.trim();
      const media = object.content ?? {};
      const hasBody = response.status !== 204 && response.headers.get("content-length") !== "0";
      if (hasBody && Object.keys(media).length > 0 && !(contentType in media)) {
        throw new ContractError(
          `${operation} ${status}: content-type ${contentType} is not declared (${Object.keys(media).join(", ")})`,
        );
      }
      if (response.status >= 400) {
        const body: unknown = await response.clone().json();
        const code = typeof body === "object" && body !== null ? (body as { error?: unknown }).error : undefined;
        if (typeof code !== "string") throw new ContractError(`${operation} ${status}: no error code`);
        const allowed = object["x-error-codes"];
        if (!allowed) throw new ContractError(`${operation} ${status}: the document lists no error codes`);
        if (!allowed.includes(code)) {
          throw new ContractError(`${operation} ${status}: error code ${code} is not declared for this operation`);
        }
      }
      seen.push({ operation, status: response.status });
      return response;
    },
  };
}
