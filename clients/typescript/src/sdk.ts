// The Raptor client SDK: a typed openapi-fetch client, the retry rule of the API as one function
// (`withRetries`), a cursor-following iterator (`pages`), the trade-updates stream as an iterator
// that reconnects and resumes with `Last-Event-ID` (`tradeUpdates`), and enum types that accept
// values this version does not know yet.
//
// Everything here runs in Node 20+ and in browsers (fetch, AbortController, crypto.randomUUID);
// nothing throws on an enum value that a newer server sends.

import createClient, { type Client, type ClientOptions } from "openapi-fetch";

import type { components, paths } from "./schema.js";

// ---- Types ----------------------------------------------------------------------------------

type Schemas = components["schemas"];

/**
 * An enum that stays open: the values this version knows (for completion and narrowing) plus
 * any other string. The server adds order statuses, activity types and error codes without a
 * new version of the API, so code that receives them must not assume the list is complete.
 */
export type Open<T extends string> = T | (string & {});

/** The order statuses this version knows. */
export type KnownOrderStatus = Schemas["OrderStatus"];
/** The activity types this version knows. */
export type KnownActivityType = Schemas["ActivityType"];
/** The error codes this version knows. */
export type KnownErrorCode = Schemas["ErrorCode"];
/** The position sides this version knows. */
export type KnownPositionSide = Schemas["PositionSide"];
/** The `retry` values this version knows. */
export type KnownRetry = Schemas["Retry"];

/** An order's status, possibly one this version does not know. */
export type OrderStatus = Open<KnownOrderStatus>;
/** An activity's type, possibly one this version does not know. */
export type ActivityType = Open<KnownActivityType>;
/** An error code, possibly one this version does not know. */
export type ErrorCode = Open<KnownErrorCode>;
/** A position's side, possibly one this version does not know. */
export type PositionSide = Open<KnownPositionSide>;
/** An error's `retry` advice, possibly one this version does not know (act on it as `"no"`). */
export type Retry = Open<KnownRetry>;

/** Response bodies, by their schema names. */
export type Order = Schemas["OrderResponse"];
export type Activity = Schemas["ActivityResponse"];
export type Position = Schemas["PositionResponse"];
export type Account = Schemas["AccountResponse"];
export type ErrorBody = Schemas["ErrorBody"];
/** The body of `POST /api/trading/orders`. */
export type CreateOrderRequest = Schemas["CreateOrderRequest"];

// The known values at run time. Each table must name every member of its generated union and
// nothing else (the compiler checks both), so regenerating the types after the API adds a value
// fails the build here until the value is listed.
const orderStatuses = { new: true, filled: true, canceled: true, expired: true } satisfies Record<KnownOrderStatus, true>;
const activityTypes = {
  fill: true,
  cancel: true,
  order_expiry: true,
  expiry: true,
  settlement: true,
  reset: true,
} satisfies Record<KnownActivityType, true>;
const positionSides = { long: true, short: true } satisfies Record<KnownPositionSide, true>;
const retryValues = { same_key: true, new_key: true, no: true } satisfies Record<KnownRetry, true>;
const errorCodes = {
  "Idempotency-Key must be a UUID string": true,
  bad_request: true,
  billing_busy: true,
  billing_not_configured: true,
  billing_request_rejected: true,
  contract_expired: true,
  database_busy: true,
  database_unavailable: true,
  duplicate_client_order_id: true,
  duplicate_reset: true,
  forbidden: true,
  idempotency_in_flight: true,
  idempotency_key_body_mismatch: true,
  idempotency_key_required: true,
  idempotency_previous_failed: true,
  idempotency_store_unavailable: true,
  insufficient_buying_power: true,
  insufficient_qty: true,
  internal: true,
  invalid_billing_request: true,
  invalid_body: true,
  invalid_display_name: true,
  invalid_email: true,
  invalid_json: true,
  invalid_marketing_opt_in: true,
  invalid_order: true,
  invalid_path: true,
  invalid_payload: true,
  invalid_query: true,
  invalid_quote: true,
  invalid_signature: true,
  invalid_subscription: true,
  invalid_symbol: true,
  invalid_time_zone: true,
  invalid_token: true,
  live_trading_unavailable: true,
  method_not_allowed: true,
  new_orders_disabled: true,
  not_found: true,
  order_not_cancelable: true,
  payload_too_large: true,
  quote_unavailable: true,
  rate_limited: true,
  request_headers_too_large: true,
  request_timeout: true,
  stream_history_gone: true,
  stripe_timeout: true,
  stripe_unavailable: true,
  subscription_active: true,
  too_many_connections: true,
  too_many_open_orders: true,
  unauthenticated: true,
  uncovered_short_option: true,
  unsupported_media_type: true,
} satisfies Record<KnownErrorCode, true>;

function keysOf<K extends string>(table: Record<K, true>): readonly K[] {
  return Object.freeze(Object.keys(table) as K[]);
}
function has(table: object, value: unknown): boolean {
  return typeof value === "string" && Object.prototype.hasOwnProperty.call(table, value);
}

/** Every order status this version knows. */
export const ORDER_STATUSES: readonly KnownOrderStatus[] = keysOf(orderStatuses);
/** Every activity type this version knows. */
export const ACTIVITY_TYPES: readonly KnownActivityType[] = keysOf(activityTypes);
/** Every error code this version knows. */
export const ERROR_CODES: readonly KnownErrorCode[] = keysOf(errorCodes);
/** Every position side this version knows. */
export const POSITION_SIDES: readonly KnownPositionSide[] = keysOf(positionSides);
/** Every `retry` value this version knows. */
export const RETRY_VALUES: readonly KnownRetry[] = keysOf(retryValues);

/** Whether this version knows the order status (false for a status a newer server added). */
export function isKnownOrderStatus(value: unknown): value is KnownOrderStatus {
  return has(orderStatuses, value);
}
/** Whether this version knows the activity type. */
export function isKnownActivityType(value: unknown): value is KnownActivityType {
  return has(activityTypes, value);
}
/** Whether this version knows the error code. */
export function isKnownErrorCode(value: unknown): value is KnownErrorCode {
  return has(errorCodes, value);
}
/** Whether this version knows the position side. */
export function isKnownPositionSide(value: unknown): value is KnownPositionSide {
  return has(positionSides, value);
}
/** Whether this version knows the `retry` value. */
export function isKnownRetry(value: unknown): value is KnownRetry {
  return has(retryValues, value);
}

// ---- The client -----------------------------------------------------------------------------

/** The typed client: `GET`, `POST`, ... by path, with request and response types from the API. */
export type RaptorClient = Client<paths>;

export interface RaptorClientOptions extends Omit<ClientOptions, "baseUrl"> {
  /** A bearer token (from sign-in or `raptor users create`), sent as `Authorization`. */
  token?: string;
}

/**
 * A typed client of the API at `baseUrl` (e.g. `https://raptor.example.com`), an openapi-fetch
 * client: `api.POST("/api/trading/orders", { params: { header: { "Idempotency-Key": key } }, body })`
 * resolves to `{ data, error, response }` and does not throw on an error status.
 */
export function createRaptorClient(baseUrl: string, options: RaptorClientOptions = {}): RaptorClient {
  const { token, ...rest } = options;
  const client = createClient<paths>({ ...rest, baseUrl });
  if (token !== undefined) {
    client.use({
      onRequest({ request }) {
        if (!request.headers.has("authorization")) request.headers.set("authorization", `Bearer ${token}`);
        return request;
      },
    });
  }
  return client;
}

// ---- Errors ---------------------------------------------------------------------------------

/**
 * An error answer, parsed. For a problem document (`application/problem+json`, every error
 * the server itself sends) `error`, `retry` and `message` are the body's; for an answer without
 * one (e.g. a load balancer's 502 page) `error` is `""`, `message` the status line and the
 * start of the text, and `retry` the rule applied to it (`"same_key"` for 502, 503 and 504,
 * else `"no"`).
 */
export interface Problem {
  /** The HTTP status. */
  status: number;
  /** The stable error code, e.g. `insufficient_buying_power`; maybe one this version does not know. */
  error: ErrorCode;
  /** What to do about it: `same_key`, `new_key`, `no`, or a value this version does not know. */
  retry: Retry;
  /** A human-readable explanation. */
  message: string;
  /** The whole body: the parsed problem document (with the code's context members), or the text. */
  body: unknown;
  /** The `Retry-After` header in milliseconds, when the answer had one. */
  retryAfterMs: number | undefined;
  /** The `x-request-id` header, for support. */
  requestId: string | undefined;
}

/** What `withRetries` knew when it stopped: what its errors carry. */
export interface RaptorErrorDetails {
  key: string;
  attempts: number;
  problem?: Problem | undefined;
  cause?: unknown;
}

/** The base of the errors `withRetries` throws. */
export class RaptorError extends Error {
  override name = "RaptorError";
  /** The `Idempotency-Key` of the operation. */
  readonly key: string;
  /** How many requests were sent. */
  readonly attempts: number;
  /** The last error answer, when there was one. */
  readonly problem: Problem | undefined;

  constructor(message: string, outcome: RaptorErrorDetails) {
    super(message, outcome.cause === undefined ? undefined : { cause: outcome.cause });
    this.key = outcome.key;
    this.attempts = outcome.attempts;
    this.problem = outcome.problem;
  }

  /** The last answer's HTTP status (undefined when no answer arrived). */
  get status(): number | undefined {
    return this.problem?.status;
  }
  /** The last answer's error code (undefined when no answer arrived). */
  get code(): ErrorCode | undefined {
    return this.problem?.error;
  }
}

/**
 * `retry: "new_key"`: the key is spent and the operation did not happen (e.g. the key was used
 * with another body, or the first attempt failed). Trying again is a new operation: decide
 * whether to, and call `withRetries` again (it makes a new key).
 */
export class KeySpentError extends RaptorError {
  override name = "KeySpentError";
  declare readonly problem: Problem;
}

/**
 * `retry: "no"`, a `retry` value this version does not know, or an error answer that is not a
 * problem document: the answer is final; retrying does not change it (e.g.
 * `insufficient_buying_power`, `not_found`, `unauthenticated`).
 */
export class RefusedError extends RaptorError {
  override name = "RefusedError";
  declare readonly problem: Problem;
}

/**
 * The deadline passed while the answer still said "try again" (or no answer arrived). The
 * outcome is unknown: the operation may have happened. The key is still good: retrying later
 * with `{ key: error.key }` and the same request learns the outcome without doing it twice.
 * `problem` is the last error answer, `cause` the last transport error.
 */
export class GaveUpError extends RaptorError {
  override name = "GaveUpError";
}

// ---- withRetries ----------------------------------------------------------------------------

/** What `withRetries` passes to each attempt besides the key. */
export interface Attempt {
  /** 1 for the first request, 2 for the first retry, ... */
  attempt: number;
  /** Aborted when the attempt times out or `options.signal` aborts: pass it to the request. */
  signal: AbortSignal;
}

/** One request: what openapi-fetch's methods resolve to. */
export type AttemptResult<T> = { data?: T; error?: unknown; response: Response };

/** Told before each wait. */
export interface RetryEvent {
  key: string;
  /** The attempt that failed. */
  attempt: number;
  /** How long `withRetries` waits before the next one. */
  delayMs: number;
  /** The error answer, when the attempt had one. */
  problem?: Problem | undefined;
  /** The transport error, when the attempt had no answer. */
  error?: unknown;
}

export interface RetryOptions {
  /** The operation's `Idempotency-Key` (default: a new `crypto.randomUUID()`). Pass the key of
   * an earlier `GaveUpError` to resume that operation. */
  key?: string;
  /** The time budget of the whole operation, waits included (default 30 000 ms). */
  deadlineMs?: number;
  /** One attempt's budget: its signal aborts after this long (default 10 000 ms, never past the
   * deadline). */
  attemptTimeoutMs?: number;
  /** Backoff without `Retry-After`: a random wait in [0, min(maxDelayMs, baseDelayMs * 2^(n-1)))
   * before retry n (defaults 100 ms and 5 000 ms). */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Aborts the operation (the attempt in flight and any wait); `withRetries` then rejects with
   * the signal's reason. */
  signal?: AbortSignal;
  /** Called before each wait (logging, metrics). */
  onRetry?: (event: RetryEvent) => void;
  /** For tests: the wait (default setTimeout, aborted by `signal`). */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** For tests: a number in [0, 1) (default Math.random). */
  random?: () => number;
  /** For tests: the clock in milliseconds (default Date.now). */
  now?: () => number;
}

/** The most added to a `Retry-After` wait, so that clients told the same time spread out. */
const RETRY_AFTER_JITTER_MS = 250;

/** Error codes (on the error or its causes) of a connection that failed or was reset. */
const NETWORK_CODES = new Set([
  "ECONNRESET",
  "ECONNREFUSED",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "EAI_AGAIN",
  "ENETUNREACH",
  "EHOSTUNREACH",
  "UND_ERR_SOCKET",
  "UND_ERR_CLOSED",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
]);

/**
 * Whether a thrown error is fetch failing to get an answer (connection refused or reset, the
 * answer cut short): fetch's `TypeError` ("fetch failed" in Node, "Failed to fetch",
 * "NetworkError ...", "Load failed" in browsers) or an error with a network error code. Other
 * errors (a bug, a middleware's error, an invalid URL) are not retried.
 */
export function isTransportError(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && typeof current === "object" && current !== null; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string" && NETWORK_CODES.has(code)) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return (
    error instanceof TypeError &&
    /fetch failed|failed to fetch|networkerror|network error|load failed|terminated/i.test(error.message)
  );
}

/** Statuses that, without a problem document, come from something in front of the server: the
 * request may or may not have reached it. */
const GATEWAY_STATUSES = new Set([502, 503, 504]);

/** `Retry-After` (delay-seconds or an HTTP date) in milliseconds. */
function retryAfterMs(header: string | null, now: number): number | undefined {
  if (header === null) return undefined;
  const text = header.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** The error answer `response` (whose body openapi-fetch parsed into `body`) as a `Problem`. */
export function parseProblem(response: Response, body: unknown, now = Date.now()): Problem {
  const common = {
    status: response.status,
    body,
    retryAfterMs: retryAfterMs(response.headers.get("retry-after"), now),
    requestId: response.headers.get("x-request-id") ?? undefined,
  };
  if (typeof body === "object" && body !== null && typeof (body as { error?: unknown }).error === "string") {
    const fields = body as { error: string; retry?: unknown; message?: unknown; detail?: unknown };
    const message = typeof fields.message === "string" ? fields.message : typeof fields.detail === "string" ? fields.detail : "";
    // A missing retry is acted on as "no", like an unknown one.
    const retry = typeof fields.retry === "string" ? fields.retry : "no";
    return { ...common, error: fields.error, retry, message };
  }
  const text = typeof body === "string" ? body : body === undefined ? "" : JSON.stringify(body);
  const status = `${response.status} ${response.statusText}`.trim();
  return {
    ...common,
    error: "",
    retry: GATEWAY_STATUSES.has(response.status) ? "same_key" : "no",
    message: text ? `${status}: ${text.slice(0, 200)}` : status,
  };
}

function defaultSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Runs one logical operation until it has an outcome, following the API's retry rule.
 *
 * `call(key, { signal })` sends the request with `Idempotency-Key: key` (and should pass
 * `signal` on). Every attempt gets the SAME key: the server executes the operation at most once
 * and answers a repeat with the stored outcome, so a retry after a lost answer cannot place a
 * second order.
 *
 * - a 2xx answer: resolves to its data;
 * - `retry: "same_key"`: waits, then the same request again;
 * - no answer (connection refused or reset, the attempt's timeout): the same request again;
 * - 502, 503 or 504 without a problem document (a proxy's answer): the same request again;
 * - `retry: "new_key"`: rejects with `KeySpentError`;
 * - `retry: "no"`, an unknown `retry`, or another error without a problem document: rejects
 *   with `RefusedError`;
 * - the deadline (`deadlineMs`, 30 s) would pass before the next attempt: rejects with
 *   `GaveUpError`.
 *
 * The wait is the answer's `Retry-After` plus up to 250 ms of jitter when it has one, else a
 * full-jitter exponential backoff (100 ms doubling to at most 5 s). It never waits past the
 * deadline: a wait that would end after it gives up at once.
 *
 * A read (GET) takes no key: ignore it; retrying a read is always safe.
 */
export async function withRetries<T>(
  call: (key: string, attempt: Attempt) => Promise<AttemptResult<T>>,
  options: RetryOptions = {},
): Promise<T> {
  const key = options.key ?? crypto.randomUUID();
  const now = options.now ?? Date.now;
  const sleep = options.sleep ?? defaultSleep;
  const random = options.random ?? Math.random;
  const baseDelayMs = options.baseDelayMs ?? 100;
  const maxDelayMs = options.maxDelayMs ?? 5_000;
  const attemptTimeoutMs = options.attemptTimeoutMs ?? 10_000;
  const outer = options.signal;
  const deadline = now() + (options.deadlineMs ?? 30_000);

  let last: { problem?: Problem | undefined; error?: unknown } = {};
  for (let attempt = 1; ; attempt++) {
    outer?.throwIfAborted();
    const remaining = deadline - now();
    if (remaining <= 0) {
      throw new GaveUpError(gaveUpMessage(attempt - 1, last), { key, attempts: attempt - 1, ...lastDetails(last) });
    }

    // The attempt's signal: aborted by its timeout or by the caller's signal.
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), Math.min(attemptTimeoutMs, remaining));
    const forward = () => controller.abort(outer?.reason);
    outer?.addEventListener("abort", forward, { once: true });
    let result: AttemptResult<T> | undefined;
    try {
      result = await call(key, { attempt, signal: controller.signal });
    } catch (error) {
      if (outer?.aborted) throw outer.reason ?? error;
      if (!controller.signal.aborted && !isTransportError(error)) throw error;
      last = { error };
    } finally {
      clearTimeout(timer);
      outer?.removeEventListener("abort", forward);
    }

    if (result !== undefined) {
      if (result.response.ok) return result.data as T;
      const problem = parseProblem(result.response, result.error, now());
      const outcome = { key, attempts: attempt, problem };
      if (problem.retry === "new_key") {
        throw new KeySpentError(`${describe(problem)}: the key is spent; a new attempt needs a new key`, outcome);
      }
      if (problem.retry !== "same_key") {
        // "no", a value this version does not know, or an answer that is not a problem document.
        throw new RefusedError(describe(problem), outcome);
      }
      last = { problem };
    }

    const delayMs =
      last.problem?.retryAfterMs !== undefined
        ? last.problem.retryAfterMs + random() * RETRY_AFTER_JITTER_MS
        : random() * Math.min(maxDelayMs, baseDelayMs * 2 ** (attempt - 1));
    if (now() + delayMs >= deadline) {
      throw new GaveUpError(gaveUpMessage(attempt, last), { key, attempts: attempt, ...lastDetails(last) });
    }
    options.onRetry?.({ key, attempt, delayMs, problem: last.problem, error: last.error });
    await sleep(delayMs, outer);
  }
}

function describe(problem: Problem): string {
  const code = problem.error === "" ? "" : ` ${problem.error}`;
  return `${problem.status}${code}: ${problem.message} (retry: ${problem.retry})`;
}

function lastDetails(last: { problem?: Problem | undefined; error?: unknown }): Omit<RaptorErrorDetails, "key" | "attempts"> {
  return { problem: last.problem, cause: last.error };
}

function gaveUpMessage(attempts: number, last: { problem?: Problem | undefined; error?: unknown }): string {
  const what = last.problem
    ? describe(last.problem)
    : last.error instanceof Error
      ? `${last.error.name}: ${last.error.message}`
      : String(last.error ?? "no attempt");
  return `gave up at the deadline after ${attempts} attempt(s); the outcome is unknown; last: ${what}`;
}

// ---- pages ----------------------------------------------------------------------------------

/** One page of a list (`GET /api/trading/orders`, `/api/trading/activities`, ...). */
export interface Page<Item> {
  data: Item[];
  has_more: boolean;
  next_cursor?: string | null;
}

/**
 * Every item of a paged list, in order: calls `fetchPage(undefined)`, then
 * `fetchPage(next_cursor)` while `has_more` is true. Wrap the page request in `withRetries` to
 * ride out transient failures:
 *
 *     for await (const order of pages((cursor) =>
 *       withRetries(() => api.GET("/api/trading/orders", { params: { query: { status: "all", cursor } } })))) { ... }
 *
 * Throws when a page says `has_more` without a new cursor (the list would never end).
 */
export async function* pages<Item>(
  fetchPage: (cursor: string | undefined) => Promise<Page<Item>>,
): AsyncGenerator<Item, void, undefined> {
  let cursor: string | undefined;
  for (;;) {
    const page = await fetchPage(cursor);
    yield* page.data;
    if (!page.has_more) return;
    const next = page.next_cursor;
    if (typeof next !== "string" || next === "" || next === cursor) {
      throw new Error(`pages: a page with has_more: true has no new next_cursor (${JSON.stringify(next)})`);
    }
    cursor = next;
  }
}

// ---- tradeUpdates ---------------------------------------------------------------------------

/** The trade event types this version knows. */
export type KnownTradeEvent = Schemas["TradeEvent"];
/** A trade update's type, possibly one this version does not know (skip it, or show it as
 * "other"). */
export type TradeEvent = Open<KnownTradeEvent>;
/** One message of `GET /api/trading/stream`: what happened to which order, with the order as it
 * is when the event is read. `event` is open: a type a newer server adds comes through. */
export type TradeUpdate = Omit<Schemas["TradeUpdate"], "event"> & { event: TradeEvent };

const tradeEvents = {
  new: true,
  fill: true,
  partial_fill: true,
  canceled: true,
  expired: true,
  rejected: true,
  settled: true,
} satisfies Record<KnownTradeEvent, true>;

/** Every trade event type this version knows. */
export const TRADE_EVENTS: readonly KnownTradeEvent[] = keysOf(tradeEvents);

/** Whether this version knows the trade event type. */
export function isKnownTradeEvent(value: unknown): value is KnownTradeEvent {
  return has(tradeEvents, value);
}

/**
 * `410 stream_history_gone`: the server no longer keeps the event named by `lastEventId`, so the
 * stream cannot resume after it without a gap. Retrying does not help: read the orders and the
 * activities again (what was missed is there), then open a stream without `lastEventId`.
 */
export class HistoryGoneError extends RefusedError {
  override name = "HistoryGoneError";
  /** The id the server refused. */
  readonly lastEventId: string | undefined;

  constructor(message: string, outcome: RaptorErrorDetails & { problem: Problem }, lastEventId: string | undefined) {
    super(message, outcome);
    this.lastEventId = lastEventId;
  }
}

/** One message of an event stream, as `EventStreamParser` dispatches it. */
export interface EventStreamMessage {
  /** The stream's last event id when the message was dispatched (its own `id:` field, or the
   * latest earlier one), undefined before any. */
  id: string | undefined;
  /** The `event:` field, `"message"` when the message had none. */
  event: string;
  /** The `data:` lines, joined with `"\n"`. */
  data: string;
}

/**
 * The server-sent events format (the WHATWG HTML standard's "event stream" parsing), fed text
 * as it arrives: lines end with `\n`, `\r\n` or `\r`, and a chunk may end anywhere, even between
 * the `\r` and `\n` of one line end. A message is dispatched at the blank line that ends it, so a
 * message cut off by a dropped connection is never dispatched: it comes again after the resume.
 * Comment lines (`:` first, the server's heartbeats) and unknown fields are skipped.
 */
export class EventStreamParser {
  /** The reconnection time a `retry:` field asked for, in milliseconds. */
  retryMs: number | undefined;
  /** The stream's last event id as of the last blank line: moved by every whole message that
   * had an `id:`, with data or without (an `id:` alone moves the position without an event). */
  lastEventId: string | undefined;
  #line = "";
  #afterCarriageReturn = false;
  #started = false;
  #id: string | undefined;
  #event = "";
  #data: string[] = [];

  /** The messages `text` completes. */
  push(text: string): EventStreamMessage[] {
    if (text === "") return [];
    if (!this.#started) {
      this.#started = true;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    // A "\r" that ended the previous text ended a line; a "\n" right after it is the same line
    // end, not an empty line (which would dispatch a message early).
    if (this.#afterCarriageReturn && text.startsWith("\n")) text = text.slice(1);
    this.#afterCarriageReturn = false;
    const messages: EventStreamMessage[] = [];
    const pending = this.#line + text;
    const ends = /\r\n|\r|\n/g;
    let start = 0;
    for (let match = ends.exec(pending); match !== null; match = ends.exec(pending)) {
      this.#field(pending.slice(start, match.index), messages);
      start = match.index + match[0].length;
      if (match[0] === "\r" && start === pending.length) this.#afterCarriageReturn = true;
    }
    this.#line = pending.slice(start);
    return messages;
  }

  #field(line: string, messages: EventStreamMessage[]): void {
    if (line === "") {
      this.#dispatch(messages);
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const name = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    switch (name) {
      case "event":
        this.#event = value;
        break;
      case "data":
        this.#data.push(value);
        break;
      case "id":
        if (!value.includes("\0")) this.#id = value;
        break;
      case "retry":
        if (/^\d+$/.test(value)) this.retryMs = Number(value);
        break;
      default:
        break;
    }
  }

  #dispatch(messages: EventStreamMessage[]): void {
    this.lastEventId = this.#id;
    if (this.#data.length > 0) {
      messages.push({ id: this.#id, event: this.#event === "" ? "message" : this.#event, data: this.#data.join("\n") });
    }
    this.#data = [];
    this.#event = "";
  }
}

/** Told before each reconnection's wait. */
export interface ReconnectEvent {
  /** Connection attempts in a row that received nothing (0 after a stream that delivered and
   * then ended). */
  failures: number;
  /** How long the iterator waits before connecting again. */
  delayMs: number;
  /** The id the reconnection resumes after (`Last-Event-ID`). */
  lastEventId: string | undefined;
  /** The error answer, when the attempt had one. */
  problem?: Problem | undefined;
  /** The transport error (or the idle timeout), when the connection failed. */
  error?: unknown;
}

export interface TradeUpdatesOptions {
  /** Resume after this event (an `id` the app stored); without it the stream starts with what
   * happens next. */
  lastEventId?: string | undefined;
  /** Stops the iteration: the connection is closed and the `for await` loop ends without an
   * error. */
  signal?: AbortSignal | undefined;
  /** A connection that receives no byte for this long is taken for dead and replaced (default
   * 45 000 ms: three of the server's 15 s heartbeats). */
  idleTimeoutMs?: number;
  /** Backoff between reconnections without `Retry-After`: a random wait in
   * [0, min(maxDelayMs, baseDelayMs * 2^(n-1))) after n failures in a row (defaults 100 ms and
   * 5 000 ms, as `withRetries`). */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Give up (`GaveUpError`) after this many connection attempts in a row that received nothing
   * (default: never). */
  maxAttempts?: number;
  /** Give up (`GaveUpError`) when no connection has delivered for this long since the stream was
   * lost (default: never). No wait runs past it. */
  deadlineMs?: number;
  /** Called when a connection is open (its `200` arrived): events that happen from then on will
   * come. */
  onConnect?: (event: { lastEventId: string | undefined }) => void;
  /** Called before each reconnection's wait (logging, metrics). */
  onReconnect?: (event: ReconnectEvent) => void;
  /** For tests: the wait (default setTimeout, aborted by `signal`). */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** For tests: a number in [0, 1) (default Math.random). */
  random?: () => number;
  /** For tests: the clock in milliseconds (default Date.now). */
  now?: () => number;
}

/**
 * The signed-in user's trade updates (`GET /api/trading/stream`) as they happen, across dropped
 * connections: an async iterable of `TradeUpdate`s. Every connection after the first sends
 * `Last-Event-ID` with the id of the last update yielded, so the server resumes right after it:
 * no update is missed or yielded twice. `lastEventId` is that id; store it with what the app did
 * with the update, and pass it back (`tradeUpdates(api, { lastEventId })`) after a restart.
 *
 * - a dropped connection, a connection silent for `idleTimeoutMs`, a stream the server ends (it
 *   shuts down): connects again after a short random wait;
 * - `retry: "same_key"` answers (`429 rate_limited`, `503 too_many_connections`, ...) and 502,
 *   503, 504 without a problem body: connects again after `Retry-After` (plus up to 250 ms),
 *   else the backoff;
 * - `410 stream_history_gone`: throws `HistoryGoneError` (no retry);
 * - another error answer (`401 unauthenticated`, ...): throws `RefusedError`;
 * - `maxAttempts` or `deadlineMs` reached: throws `GaveUpError`.
 *
 * An instance is iterated once. The errors carry an empty `key` (a read has none).
 */
export class TradeUpdateStream implements AsyncIterable<TradeUpdate> {
  readonly #api: RaptorClient;
  readonly #options: TradeUpdatesOptions;
  #lastEventId: string | undefined;
  #iterated = false;

  constructor(api: RaptorClient, options: TradeUpdatesOptions = {}) {
    this.#api = api;
    this.#options = options;
    this.#lastEventId = options.lastEventId;
  }

  /** The id of the last update yielded (or `options.lastEventId` before the first). */
  get lastEventId(): string | undefined {
    return this.#lastEventId;
  }

  [Symbol.asyncIterator](): AsyncGenerator<TradeUpdate, void, undefined> {
    if (this.#iterated) {
      throw new Error("a TradeUpdateStream is iterated once: make another with tradeUpdates(api, { lastEventId })");
    }
    this.#iterated = true;
    return this.#run();
  }

  async *#run(): AsyncGenerator<TradeUpdate, void, undefined> {
    const options = this.#options;
    const now = options.now ?? Date.now;
    const sleep = options.sleep ?? defaultSleep;
    const random = options.random ?? Math.random;
    const idleTimeoutMs = options.idleTimeoutMs ?? 45_000;
    const baseDelayMs = options.baseDelayMs ?? 100;
    const maxDelayMs = options.maxDelayMs ?? 5_000;
    const maxAttempts = options.maxAttempts ?? Infinity;
    const deadlineMs = options.deadlineMs ?? Infinity;
    const outer = options.signal;

    // Attempts in a row that received nothing, and since when nothing has been received: what
    // the backoff, maxAttempts and deadlineMs go by.
    let failures = 0;
    let lostAt = now();
    let last: { problem?: Problem | undefined; error?: unknown } = {};
    for (let attempt = 1; ; attempt++) {
      if (outer?.aborted) return;
      if (attempt > 1) {
        const gaveUp = (why: string) =>
          new GaveUpError(`trade updates: ${why}; last: ${lastWhat(last)}`, { key: "", attempts: failures, ...lastDetails(last) });
        if (failures >= maxAttempts) throw gaveUp(`${failures} connection attempts in a row received nothing`);
        const delayMs =
          last.problem?.retryAfterMs !== undefined
            ? last.problem.retryAfterMs + random() * RETRY_AFTER_JITTER_MS
            : random() * Math.min(maxDelayMs, baseDelayMs * 2 ** Math.max(0, failures - 1));
        if (now() + delayMs - lostAt > deadlineMs) throw gaveUp(`no connection delivered for ${deadlineMs} ms`);
        options.onReconnect?.({ failures, delayMs, lastEventId: this.#lastEventId, problem: last.problem, error: last.error });
        try {
          await sleep(delayMs, outer);
        } catch (error) {
          if (outer?.aborted) return;
          throw error;
        }
        if (outer?.aborted) return;
      }

      // The connection ends when the caller's signal aborts, when the idle timeout fires, and
      // when the iteration ends. Aborting the request's signal is not enough once the answer has
      // come: Node's fetch follows the signal of a Request object (openapi-fetch makes one)
      // through a weak reference, so after that Request is garbage-collected an abort no longer
      // reaches the body, and a silent connection would be read forever. The body is cancelled
      // directly as well.
      const controller = new AbortController();
      let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
      const stop = (reason?: unknown) => {
        controller.abort(reason);
        reader?.cancel(reason).catch(() => {});
      };
      const forward = () => stop(outer?.reason);
      outer?.addEventListener("abort", forward, { once: true });
      let idle: Error | undefined;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const arm = () => {
        clearTimeout(timer);
        timer = setTimeout(() => {
          idle = new Error(`trade updates: no byte for ${idleTimeoutMs} ms`);
          stop(idle);
        }, idleTimeoutMs);
      };
      let received = false;
      try {
        arm();
        const resumeAfter = this.#lastEventId;
        const result = await this.#api.GET("/api/trading/stream", {
          params: { header: resumeAfter === undefined ? {} : { "Last-Event-ID": resumeAfter } },
          headers: { accept: "text/event-stream" },
          parseAs: "stream",
          signal: controller.signal,
        });
        const { response } = result;
        if (!response.ok) {
          const problem = parseProblem(response, result.error, now());
          const outcome = { key: "", attempts: failures + 1, problem };
          if (problem.error === "stream_history_gone") {
            throw new HistoryGoneError(
              `${describe(problem)}: read the orders and activities again, then open the stream without lastEventId`,
              outcome,
              resumeAfter,
            );
          }
          // A read has no key to spend, so "new_key" (an internal error) is retried like
          // "same_key"; "no" and values this version does not know are final.
          if (problem.retry !== "same_key" && problem.retry !== "new_key") throw new RefusedError(describe(problem), outcome);
          last = { problem };
        } else {
          const media = (response.headers.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
          if (media !== "text/event-stream") {
            const problem = parseProblem(response, `not an event stream (${media || "no content-type"})`, now());
            throw new RefusedError(describe(problem), { key: "", attempts: failures + 1, problem });
          }
          options.onConnect?.({ lastEventId: resumeAfter });
          last = {};
          if (result.data) {
            reader = result.data.getReader();
            const decoder = new TextDecoder();
            const parser = new EventStreamParser();
            for (;;) {
              const { done, value } = await reader.read();
              // A cancelled body ends like a finished one: tell them apart.
              if (outer?.aborted) return;
              if (idle) throw idle;
              if (done) break;
              arm();
              received = true;
              for (const message of parser.push(decoder.decode(value, { stream: true }))) {
                const update = tradeUpdateOf(message);
                this.#lastEventId = message.id || update.id;
                yield update;
              }
              // A whole message without data (an `id:` alone) moves the position too, as it
              // does an EventSource's: a server may mark where a stream starts that way.
              if (parser.lastEventId) this.#lastEventId = parser.lastEventId;
            }
          }
          // The server ended the stream (its drain at shutdown): connect again, after the last id.
        }
      } catch (error) {
        if (outer?.aborted) return;
        if (error instanceof RaptorError) throw error;
        if (idle === undefined && !isTransportError(error)) throw error;
        last = { error: idle ?? error };
      } finally {
        clearTimeout(timer);
        outer?.removeEventListener("abort", forward);
        // Closes the connection when the loop is left early (break, return, an exception).
        stop();
      }
      if (received) {
        failures = 0;
        lostAt = now();
      } else {
        failures++;
      }
    }
  }
}

/**
 * The signed-in user's trade updates as they happen (`GET /api/trading/stream`), resuming with
 * `Last-Event-ID` across dropped connections; see `TradeUpdateStream`.
 *
 *     const updates = tradeUpdates(api, { lastEventId: await store.get("trade-updates"), signal });
 *     for await (const update of updates) {
 *       await apply(update);
 *       await store.set("trade-updates", update.id);
 *     }
 */
export function tradeUpdates(api: RaptorClient, options: TradeUpdatesOptions = {}): TradeUpdateStream {
  return new TradeUpdateStream(api, options);
}

/** A message's data as a TradeUpdate (throws on one that is not: the same message would come
 * again after a reconnection, so retrying cannot help). */
function tradeUpdateOf(message: EventStreamMessage): TradeUpdate {
  let value: unknown;
  try {
    value = JSON.parse(message.data);
  } catch (error) {
    throw new RaptorError(`trade updates: a ${message.event} message whose data is not JSON`, { key: "", attempts: 0, cause: error });
  }
  const fields = value as { id?: unknown; event?: unknown } | null;
  if (typeof fields !== "object" || fields === null || typeof fields.id !== "string" || typeof fields.event !== "string") {
    throw new RaptorError(`trade updates: a ${message.event} message whose data is not a TradeUpdate`, { key: "", attempts: 0 });
  }
  return value as TradeUpdate;
}

function lastWhat(last: { problem?: Problem | undefined; error?: unknown }): string {
  if (last.problem) return describe(last.problem);
  if (last.error instanceof Error) return `${last.error.name}: ${last.error.message}`;
  return last.error === undefined ? "the server ended the stream" : String(last.error);
}
