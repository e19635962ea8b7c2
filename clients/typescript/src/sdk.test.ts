// Unit tests of the SDK (src/sdk.ts) against a local node:http server that scripts its answers:
// `node --test dist/sdk.test.js` (scripts/client-e2e.sh runs it before the journey). Waits are
// injected (`sleep`, `random`, `now`), so no test sleeps for real except the attempt timeout and
// the trade-updates stream's idle timeout.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

import { ContractError, isOpen } from "./contract.js";
import {
  EventStreamParser,
  GaveUpError,
  HistoryGoneError,
  KeySpentError,
  RefusedError,
  createRaptorClient,
  isKnownActivityType,
  isKnownErrorCode,
  isKnownOrderStatus,
  isKnownTradeEvent,
  isTransportError,
  pages,
  tradeUpdates,
  withRetries,
  type Activity,
  type CreateOrderRequest,
  type EventStreamMessage,
  type Order,
  type RaptorClient,
  type ReconnectEvent,
  type RetryOptions,
  type TradeUpdate,
  type TradeUpdateStream,
  type TradeUpdatesOptions,
} from "./sdk.js";

// ---- The spec and its examples --------------------------------------------------------------

interface MediaObject {
  example?: unknown;
}
interface SpecDocument {
  paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, MediaObject> }> }>>;
  components: { schemas: Record<string, { enum?: string[] }> };
}

const spec = JSON.parse(readFileSync(new URL("../../../openapi/openapi.json", import.meta.url), "utf8")) as SpecDocument;

/** A deep copy of the example of a response of `doc` (failing when the document has none). */
function example<T>(doc: SpecDocument, path: string, method: string, status: string, media = "application/json"): T {
  const value = doc.paths[path]?.[method]?.responses[status]?.content?.[media]?.example;
  assert.ok(value !== undefined, `${method.toUpperCase()} ${path} ${status} ${media} has an example`);
  return structuredClone(value) as T;
}

function enumOf(doc: SpecDocument, schema: string): string[] {
  const values = doc.components.schemas[schema]?.enum;
  assert.ok(Array.isArray(values), `components.schemas.${schema} is an enum`);
  return values;
}

/** The order the document gives as `POST /api/trading/orders`' 201 example. */
const exampleOrder = example<Order>(spec, "/api/trading/orders", "post", "201");

function problem(status: number, error: string, retry: string, message = `${error} (test)`): Answer {
  return {
    status,
    contentType: "application/problem+json",
    body: { type: `/docs/errors#${error}`, title: "test", status, detail: message, error, message, retry },
  };
}

// ---- A scripted server ----------------------------------------------------------------------

interface Received {
  method: string;
  url: URL;
  key: string | undefined;
  authorization: string | undefined;
  body: string;
}

/** An answer: a status and a body, "drop" (destroy the connection without answering), or a
 * delayed answer. */
type Answer = { status: number; body?: unknown; contentType?: string; headers?: Record<string, string>; delayMs?: number };
type Reply = Answer | "drop";

interface Stub {
  url: string;
  received: Received[];
  close(): Promise<void>;
}

/** A server answering the nth request with `route(request, n)`. */
async function stub(route: (request: Received, n: number) => Reply): Promise<Stub> {
  const received: Received[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const request: Received = {
        method: req.method ?? "",
        url: new URL(req.url ?? "/", "http://stub"),
        key: header(req, "idempotency-key"),
        authorization: header(req, "authorization"),
        body: Buffer.concat(chunks).toString("utf8"),
      };
      received.push(request);
      const reply = route(request, received.length - 1);
      if (reply === "drop") {
        // The request was read (as if executed) and the connection dies without an answer.
        req.socket.destroy();
        return;
      }
      const send = () => {
        if (res.destroyed) return;
        const text = typeof reply.body === "string" ? reply.body : reply.body === undefined ? "" : JSON.stringify(reply.body);
        res.writeHead(reply.status, {
          "content-type": reply.contentType ?? (typeof reply.body === "string" ? "text/html" : "application/json"),
          "content-length": Buffer.byteLength(text),
          ...reply.headers,
        });
        res.end(text);
      };
      if (reply.delayMs) setTimeout(send, reply.delayMs);
      else send();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** The replies in order; the last one again for any further request. */
function script(...replies: Reply[]): (request: Received, n: number) => Reply {
  return (_request, n) => replies[Math.min(n, replies.length - 1)]!;
}

/** Waits recorded instead of slept. */
function recorder(extra: Partial<RetryOptions> = {}): RetryOptions & { delays: number[] } {
  const delays: number[] = [];
  return {
    delays,
    sleep: async (ms: number) => {
      delays.push(ms);
    },
    random: () => 0.5,
    ...extra,
  };
}

const buy: CreateOrderRequest = { symbol: "AAPL", qty: "1", side: "buy", type: "market" };

function placeOrder(api: RaptorClient, options: RetryOptions, body = buy): Promise<Order> {
  return withRetries(
    (key, { signal }) => api.POST("/api/trading/orders", { params: { header: { "Idempotency-Key": key } }, body, signal }),
    options,
  );
}

/** No test takes a second; a broken retry loop fails instead of hanging. */
const LIMIT = 15_000;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

function keysOf(server: Stub): (string | undefined)[] {
  return server.received.map((r) => r.key);
}

// ---- withRetries ----------------------------------------------------------------------------

test("withRetries: a 503 same_key answer is retried with the same key and the 201 returned", { timeout: LIMIT }, async () => {
  const server = await stub(script(problem(503, "database_busy", "same_key"), { status: 201, body: exampleOrder }));
  try {
    const api = createRaptorClient(server.url, { token: "t0k3n" });
    const options = recorder();
    const order = await placeOrder(api, options);
    assert.equal(order.id, exampleOrder.id);
    assert.equal(server.received.length, 2);
    const [first, second] = keysOf(server);
    assert.match(first ?? "", UUID);
    assert.equal(second, first, "the retry carries the first attempt's key");
    assert.equal(server.received[1]?.body, server.received[0]?.body, "and the same body");
    assert.equal(server.received[0]?.authorization, "Bearer t0k3n");
    assert.equal(options.delays.length, 1);

    // Another logical operation gets another key.
    await placeOrder(api, recorder());
    assert.notEqual(server.received[2]?.key, first, "a new operation, a new key");
  } finally {
    await server.close();
  }
});

test("withRetries: a dropped connection is retried with the same key", { timeout: LIMIT }, async () => {
  const server = await stub(script("drop", { status: 201, body: exampleOrder }));
  try {
    const api = createRaptorClient(server.url);
    const seen: unknown[] = [];
    const order = await placeOrder(api, recorder({ onRetry: (event) => seen.push(event.error) }));
    assert.equal(order.id, exampleOrder.id);
    assert.equal(server.received.length, 2, "the request was sent again");
    assert.equal(server.received[1]?.key, server.received[0]?.key, "with the same key");
    assert.equal(seen.length, 1);
    assert.ok(isTransportError(seen[0]), `the failure was a transport error (${String(seen[0])})`);
  } finally {
    await server.close();
  }
});

test("withRetries: a 502 without a problem body and an attempt's timeout are retried with the same key", { timeout: LIMIT }, async () => {
  const server = await stub(
    script(
      { status: 502, body: "<html>bad gateway</html>" },
      { status: 201, body: exampleOrder, delayMs: 1_000 },
      { status: 201, body: exampleOrder },
    ),
  );
  try {
    const api = createRaptorClient(server.url);
    const order = await placeOrder(api, recorder({ attemptTimeoutMs: 200 }));
    assert.equal(order.id, exampleOrder.id);
    assert.equal(server.received.length, 3, "502, a timed-out attempt, then the answer");
    assert.deepEqual(new Set(keysOf(server)).size, 1, "one key for the three attempts");
  } finally {
    await server.close();
  }
});

test("withRetries: Retry-After is honoured, backoff without it", { timeout: LIMIT }, async () => {
  const server = await stub(
    script(
      { ...problem(503, "database_busy", "same_key"), headers: { "retry-after": "2" } },
      { ...problem(429, "rate_limited", "same_key"), headers: { "retry-after": "1" } },
      problem(409, "idempotency_in_flight", "same_key"),
      { status: 201, body: exampleOrder },
    ),
  );
  try {
    const api = createRaptorClient(server.url);
    const options = recorder({ random: () => 0.5 });
    await placeOrder(api, options);
    // Retry-After plus 0.5 x 250 ms of jitter; then 0.5 x min(5 s, 100 ms x 2^2).
    assert.deepEqual(options.delays, [2_125, 1_125, 200]);
    assert.equal(new Set(keysOf(server)).size, 1);

    // Backoff: full jitter under 100 ms x 2^(n-1), capped at 5 s.
    const busy = await stub(script(problem(503, "database_busy", "same_key")));
    try {
      const backoff = recorder({ random: () => 0.999, deadlineMs: 60_000 });
      let clock = 0;
      backoff.now = () => clock;
      const sleep = backoff.sleep!;
      backoff.sleep = async (ms) => {
        clock += ms;
        await sleep(ms);
      };
      await assert.rejects(placeOrder(createRaptorClient(busy.url), backoff), GaveUpError);
      const caps = backoff.delays.map((d) => Math.round(d / 0.999));
      assert.deepEqual(caps.slice(0, 8), [100, 200, 400, 800, 1_600, 3_200, 5_000, 5_000]);
    } finally {
      await busy.close();
    }
  } finally {
    await server.close();
  }
});

test("withRetries: retry new_key throws KeySpentError", { timeout: LIMIT }, async () => {
  const server = await stub(script(problem(422, "idempotency_key_body_mismatch", "new_key", "this key was used with another request")));
  try {
    const options = recorder({ key: "0b3c3f5e-8a47-4a43-9c8e-0f9a2f1d9a10" });
    const error = await placeOrder(createRaptorClient(server.url), options).then(
      () => assert.fail("resolved"),
      (e: unknown) => e,
    );
    assert.ok(error instanceof KeySpentError, String(error));
    assert.equal(error.key, "0b3c3f5e-8a47-4a43-9c8e-0f9a2f1d9a10", "options.key is the key");
    assert.equal(error.attempts, 1);
    assert.equal(error.status, 422);
    assert.equal(error.code, "idempotency_key_body_mismatch");
    assert.equal(error.problem.retry, "new_key");
    assert.equal(error.problem.message, "this key was used with another request");
    assert.equal((error.problem.body as { title?: string }).title, "test", "the whole body");
    assert.deepEqual(keysOf(server), ["0b3c3f5e-8a47-4a43-9c8e-0f9a2f1d9a10"]);
    assert.deepEqual(options.delays, [], "not retried");
  } finally {
    await server.close();
  }
});

test("withRetries: retry no, an unknown retry, or an error without a problem body throws RefusedError", { timeout: LIMIT }, async () => {
  const server = await stub(
    script(
      problem(403, "insufficient_buying_power", "no"),
      problem(409, "idempotency_in_flight", "after_lunch"),
      { status: 500, body: "<html>oops</html>" },
    ),
  );
  try {
    const api = createRaptorClient(server.url);
    for (const [status, code, retry] of [
      [403, "insufficient_buying_power", "no"],
      [409, "idempotency_in_flight", "after_lunch"],
      [500, "", "no"],
    ] as const) {
      const options = recorder();
      const error = await placeOrder(api, options).then(
        () => assert.fail("resolved"),
        (e: unknown) => e,
      );
      assert.ok(error instanceof RefusedError, `${status}: ${String(error)}`);
      assert.equal(error.attempts, 1, `${status}: not retried`);
      assert.equal(error.problem.status, status);
      assert.equal(error.problem.error, code);
      assert.equal(error.problem.retry, retry);
      assert.deepEqual(options.delays, []);
    }
    assert.equal(server.received.length, 3);

    // An error thrown by the call that is not a transport failure (a bug, a middleware's
    // verdict) is not retried either.
    let calls = 0;
    await assert.rejects(
      withRetries(async () => {
        calls++;
        throw new ContractError("not in the document");
      }, recorder()),
      ContractError,
    );
    assert.equal(calls, 1);
  } finally {
    await server.close();
  }
});

test("withRetries: GaveUpError at the deadline, never sleeping past it", { timeout: LIMIT }, async () => {
  const server = await stub(script(problem(503, "database_busy", "same_key")));
  const dropping = await stub(script("drop"));
  const later = await stub(script({ ...problem(503, "database_busy", "same_key"), headers: { "retry-after": "5" } }));
  try {
    const fake = () => {
      let clock = 0;
      const options = recorder({ deadlineMs: 1_000, random: () => 0.999, now: () => clock });
      options.sleep = async (ms) => {
        options.delays.push(ms);
        clock += ms;
      };
      return options;
    };

    // 503 same_key forever: waits of ~100, 200, 400; the next (~800) would end past 1 s.
    const options = fake();
    const error = await placeOrder(createRaptorClient(server.url), options).then(
      () => assert.fail("resolved"),
      (e: unknown) => e,
    );
    assert.ok(error instanceof GaveUpError, String(error));
    assert.equal(error.attempts, 4);
    assert.equal(server.received.length, 4);
    assert.equal(new Set(keysOf(server)).size, 1, "one key throughout");
    assert.equal(error.key, server.received[0]?.key, "the error names the key to resume with");
    assert.equal(error.problem?.error, "database_busy", "carries the last problem");
    assert.ok(options.delays.reduce((a, b) => a + b, 0) < 1_000, `slept ${options.delays.join(", ")} < 1 s`);

    // No answer ever: the last transport error is the cause.
    const cut = await placeOrder(createRaptorClient(dropping.url), fake()).then(
      () => assert.fail("resolved"),
      (e: unknown) => e,
    );
    assert.ok(cut instanceof GaveUpError, String(cut));
    assert.equal(cut.problem, undefined);
    assert.ok(isTransportError(cut.cause), `cause: ${String(cut.cause)}`);
    assert.equal(new Set(keysOf(dropping)).size, 1);

    // Retry-After past the deadline: gives up at once instead of sleeping.
    const early = fake();
    await assert.rejects(placeOrder(createRaptorClient(later.url), early), GaveUpError);
    assert.deepEqual(early.delays, []);
    assert.equal(later.received.length, 1);
  } finally {
    await Promise.all([server.close(), dropping.close(), later.close()]);
  }
});

// ---- pages ----------------------------------------------------------------------------------

function order(id: number, status: string = "filled"): Order {
  return {
    ...structuredClone(exampleOrder),
    id: `00000000-0000-4000-8000-${String(id).padStart(12, "0")}`,
    status: status as Order["status"],
  };
}

/** `GET /api/trading/orders` over `all`, `limit` at a time, the cursor being the next index;
 * the other operations answer `other`. */
function ordersRoute(all: Order[], limit: number, other: Reply = { status: 404, body: {} }) {
  return (request: Received): Reply => {
    if (request.method !== "GET" || request.url.pathname !== "/api/trading/orders") return other;
    const start = Number(request.url.searchParams.get("cursor") ?? "0");
    const data = all.slice(start, start + limit);
    const more = start + limit < all.length;
    return { status: 200, body: { data, has_more: more, next_cursor: more ? String(start + limit) : null } };
  };
}

function listOrders(api: RaptorClient, options: RetryOptions = recorder()): AsyncGenerator<Order> {
  return pages((cursor) =>
    withRetries(
      (_key, { signal }) => api.GET("/api/trading/orders", { params: { query: { status: "all", limit: 2, cursor } }, signal }),
      options,
    ),
  );
}

test("pages: yields every item once across 3 pages", { timeout: LIMIT }, async () => {
  const all = [1, 2, 3, 4, 5].map((n) => order(n));
  const server = await stub(ordersRoute(all, 2));
  try {
    const ids: string[] = [];
    for await (const item of listOrders(createRaptorClient(server.url))) ids.push(item.id);
    assert.deepEqual(ids, all.map((o) => o.id));
    assert.deepEqual(
      server.received.map((r) => r.url.searchParams.get("cursor")),
      [null, "2", "4"],
      "three pages, each cursor followed once",
    );

    // A page that says has_more without a cursor ends the iteration with an error, not a loop.
    const broken = pages(async () => ({ data: [1], has_more: true, next_cursor: null }));
    await assert.rejects(async () => {
      for await (const _ of broken) void _;
    }, /next_cursor/);
  } finally {
    await server.close();
  }
});

// ---- A newer API: values this version does not know ----------------------------------------

test("compatibility: a server that adds an order status, an activity type and an error code", { timeout: LIMIT }, async () => {
  // The document a newer server would serve: a copy of this one with a value added to each
  // enum.
  const newer = structuredClone(spec);
  const NEW_STATUS = "held";
  const NEW_ACTIVITY = "dividend";
  const NEW_CODE = "ledger_locked";
  enumOf(newer, "OrderStatus").push(NEW_STATUS);
  enumOf(newer, "ActivityType").push(NEW_ACTIVITY);
  enumOf(newer, "ErrorCode").push(NEW_CODE);
  for (const [schema, value] of [
    ["OrderStatus", NEW_STATUS],
    ["ActivityType", NEW_ACTIVITY],
    ["ErrorCode", NEW_CODE],
  ] as const) {
    assert.ok(enumOf(newer, schema).includes(value), `${value} is in the newer ${schema}`);
    assert.ok(!enumOf(spec, schema).includes(value), `${value} is not in this version's ${schema}`);
  }

  // Bodies from the newer document's examples, carrying the new values.
  const held = example<Order>(newer, "/api/trading/orders", "post", "201");
  held.status = NEW_STATUS as Order["status"];
  const listed = example<{ data: Order[] }>(newer, "/api/trading/orders", "get", "200").data[0]!;
  const heldList = [1, 2, 3].map((n) => ({ ...listed, id: `00000000-0000-4000-8000-00000000000${n}`, status: n === 2 ? NEW_STATUS : listed.status }) as Order);
  const feed = example<{ data: Activity[]; has_more: boolean; next_cursor: string | null }>(newer, "/api/trading/activities", "get", "200");
  feed.data = [{ ...feed.data[0]!, type: NEW_ACTIVITY as Activity["type"], id: "dividend:1" }, ...feed.data];
  const locked = example<Record<string, unknown>>(newer, "/api/trading/orders", "post", "503", "application/problem+json");
  Object.assign(locked, { error: NEW_CODE, retry: "same_key", type: `/docs/errors#${NEW_CODE}`, message: "the ledger is locked" });
  const refused = example<Record<string, unknown>>(newer, "/api/trading/orders", "post", "503", "application/problem+json");
  Object.assign(refused, { error: NEW_CODE, retry: "no", type: `/docs/errors#${NEW_CODE}`, message: "the ledger is closed" });

  let posts = 0;
  const server = await stub((request) => {
    if (request.method === "POST" && request.url.pathname === "/api/trading/orders") {
      posts++;
      // 1: the new code saying same_key, 2: the order with the new status, 3: the new code saying no.
      if (posts === 1) return { status: 503, body: locked, contentType: "application/problem+json" };
      if (posts === 2) return { status: 201, body: held };
      return { status: 503, body: refused, contentType: "application/problem+json" };
    }
    if (request.method === "GET" && request.url.pathname === "/api/trading/activities") return { status: 200, body: feed };
    return ordersRoute(heldList, 2)(request);
  });
  try {
    const api = createRaptorClient(server.url);

    // The new code with retry same_key is retried with the same key; the order comes back with
    // the new status.
    const placed = await placeOrder(api, recorder());
    assert.equal(placed.status, NEW_STATUS);
    assert.equal(isKnownOrderStatus(placed.status), false);
    assert.equal(server.received[1]?.key, server.received[0]?.key);
    // (The strict contract layer, by design, does throw on it: the journey would fail.)
    assert.throws(() => isOpen(placed.status), ContractError);

    // Lists with the new status and the new activity type page through.
    const statuses: string[] = [];
    for await (const item of listOrders(api)) statuses.push(item.status);
    assert.deepEqual(statuses, [listed.status, NEW_STATUS, listed.status]);
    assert.deepEqual(statuses.map(isKnownOrderStatus), [true, false, true]);
    const types: string[] = [];
    for await (const activity of pages((cursor) =>
      withRetries((_key, { signal }) => api.GET("/api/trading/activities", { params: { query: { cursor } }, signal })),
    )) {
      types.push(activity.type);
    }
    assert.deepEqual(types, [NEW_ACTIVITY, "fill"]);
    assert.deepEqual(types.map(isKnownActivityType), [false, true]);

    // The new code with retry no: RefusedError carrying the code as it came.
    const error = await placeOrder(api, recorder()).then(
      () => assert.fail("resolved"),
      (e: unknown) => e,
    );
    assert.ok(error instanceof RefusedError, String(error));
    assert.equal(error.code, NEW_CODE);
    assert.equal(error.problem.message, "the ledger is closed");
    assert.equal(isKnownErrorCode(error.code), false);
    assert.equal(error.attempts, 1);
  } finally {
    await server.close();
  }
});

// ---- tradeUpdates ---------------------------------------------------------------------------

/** The document's example of a trade update, as event `id`: `n`, of type `event`. Each carries
 * `position_qty`, a member this version's type may not have yet: it must come through. */
function tradeUpdate(n: number, event = "fill", extra: Record<string, unknown> = {}): TradeUpdate {
  const base = example<TradeUpdate>(spec, "/api/trading/stream", "get", "200", "text/event-stream");
  return { ...base, id: String(n), event, position_qty: String(n), ...extra } as TradeUpdate;
}

/** One SSE message as the server writes it (`eol` for the other line ends a server may use). */
function sse(update: TradeUpdate, eol = "\n"): string {
  return `id: ${update.id}${eol}event: ${update.event}${eol}data: ${JSON.stringify(update)}${eol}${eol}`;
}

/** The same message cut off before its blank line: what a connection that breaks mid-message
 * leaves behind. It must never be yielded. */
function unfinished(update: TradeUpdate): string {
  return sse(update).slice(0, -1);
}

/** What one stream connection does: written in order (a pause between writes, so each is its
 * own chunk), `{ pauseMs }` waits, then "drop" (destroy the connection mid-stream), "end" (end
 * the answer cleanly) or, after the last step, the connection is held open. */
type StreamStep = string | Uint8Array | { pauseMs: number } | "drop" | "end";
type StreamReply = { stream: StreamStep[] } | Answer | "drop" | "hang";

interface StreamRequest {
  lastEventId: string | undefined;
  accept: string | undefined;
  authorization: string | undefined;
}

interface StreamStub {
  url: string;
  received: StreamRequest[];
  /** Connections whose socket has closed. */
  closed: number;
  close(): Promise<void>;
}

const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A server answering the nth request to the stream with `route(request, n)`. */
async function streamStub(route: (request: StreamRequest, n: number) => StreamReply): Promise<StreamStub> {
  const state: StreamStub = { url: "", received: [], closed: 0, close: async () => {} };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const request: StreamRequest = {
      lastEventId: header(req, "last-event-id"),
      accept: header(req, "accept"),
      authorization: header(req, "authorization"),
    };
    state.received.push(request);
    res.socket?.on("close", () => state.closed++);
    const reply = route(request, state.received.length - 1);
    if (reply === "drop") {
      req.socket.destroy();
      return;
    }
    if (reply === "hang") return; // no answer, not even its head
    if (!("stream" in reply)) {
      const text = typeof reply.body === "string" ? reply.body : JSON.stringify(reply.body ?? {});
      res.writeHead(reply.status, {
        "content-type": reply.contentType ?? "application/problem+json",
        "content-length": Buffer.byteLength(text),
        ...reply.headers,
      });
      res.end(text);
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    res.flushHeaders();
    void (async () => {
      for (const step of reply.stream) {
        if (res.destroyed) return;
        if (step === "drop") {
          res.socket?.destroy();
          return;
        }
        if (step === "end") {
          res.end();
          return;
        }
        if (typeof step === "object" && "pauseMs" in step) {
          await pause(step.pauseMs);
          continue;
        }
        res.write(step);
        await pause(5);
      }
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  state.url = `http://127.0.0.1:${port}`;
  state.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return state;
}

/** The stream's replies in order; the last one again for any further request. */
function streamScript(...replies: StreamReply[]): (request: StreamRequest, n: number) => StreamReply {
  return (_request, n) => replies[Math.min(n, replies.length - 1)]!;
}

/** The first `count` updates of `stream` (then the loop is left, closing the connection). */
async function take(stream: TradeUpdateStream, count: number): Promise<TradeUpdate[]> {
  return until(stream, (updates) => updates.length === count);
}

/** The updates of `stream` up to the one `done` accepts (then the loop is left). A test waits for
 * the last update the stub sends, so one that goes missing fails an assertion instead of hanging. */
async function until(stream: TradeUpdateStream, done: (updates: TradeUpdate[]) => boolean): Promise<TradeUpdate[]> {
  const updates: TradeUpdate[] = [];
  for await (const update of stream) {
    updates.push(update);
    if (done(updates)) break;
  }
  return updates;
}

const through = (id: string) => (updates: TradeUpdate[]) => updates.at(-1)?.id === id;

/** Options recording the waits and the reconnections instead of sleeping. A loop that would
 * reconnect without end fails at its 50th wait instead of spinning until the test's timeout. */
function streamOptions(extra: TradeUpdatesOptions = {}): TradeUpdatesOptions & { delays: number[]; reconnects: ReconnectEvent[] } {
  const delays: number[] = [];
  const reconnects: ReconnectEvent[] = [];
  return {
    delays,
    reconnects,
    sleep: async (ms: number) => {
      delays.push(ms);
      if (delays.length >= 50) throw new Error("50 reconnections: the iterator never stops");
    },
    random: () => 0.5,
    onReconnect: (event) => reconnects.push(event),
    ...extra,
  };
}

const ids = (updates: TradeUpdate[]) => updates.map((u) => u.id);

// A full garbage collection on demand (the test runner starts node without --expose-gc): what a
// long-lived stream meets, and what collects the Request object a fetch was made from.
setFlagsFromString("--expose-gc");
const collectGarbage = runInNewContext("gc") as () => void;

/** Lets the current job end (so weak references may be cleared), then collects. */
async function afterCollection(): Promise<void> {
  await pause(20);
  collectGarbage();
}

test("EventStreamParser: the same messages whichever way the text is cut", () => {
  // LF, CRLF and CR line ends, a comment (a heartbeat), data on two lines, a field without a
  // space after its colon, an id carried over to a message without one, `retry`, an unknown
  // field, a message without data (not dispatched) and an unfinished one at the end.
  const text =
    "\uFEFF: heartbeat\n\n" +
    "id: 1\r\nevent: new\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n" +
    "id: 2\revent: fill\rdata: {\"b\":\r" +
    "data: 2}\r\r" +
    "retry: 2500\nfoo: bar\ndata:x\n\n" +
    "id: 9\nevent: nothing\n\n" +
    ": another heartbeat\n" +
    "id: 3\ndata: cut";
  const expected: EventStreamMessage[] = [
    { id: "1", event: "new", data: '{"a":\n1}' },
    { id: "2", event: "fill", data: '{"b":\n2}' },
    { id: "2", event: "message", data: "x" },
  ];
  const whole = new EventStreamParser();
  assert.deepEqual(whole.push(text), expected);
  assert.equal(whole.retryMs, 2500);
  assert.equal(whole.lastEventId, "9", "an id without data moves the position; an unfinished message does not");
  for (let cut = 0; cut <= text.length; cut++) {
    const parser = new EventStreamParser();
    const messages = [...parser.push(text.slice(0, cut)), ...parser.push(text.slice(cut))];
    assert.deepEqual(messages, expected, `cut at ${cut} (${JSON.stringify(text.slice(Math.max(0, cut - 3), cut + 3))})`);
    assert.equal(parser.lastEventId, "9");
  }
  const bytewise = new EventStreamParser();
  assert.deepEqual([...text].flatMap((c) => bytewise.push(c)), expected, "one character at a time");
});

test("tradeUpdates: messages split across chunks, CRLF, heartbeats and multi-byte text", { timeout: LIMIT }, async () => {
  const one = tradeUpdate(1, "new");
  const two = tradeUpdate(2, "fill", { reason: "größe ✓" });
  const three = tradeUpdate(3, "a_type_added_later");
  const twoBytes = Buffer.from(sse(two));
  const check = twoBytes.indexOf(Buffer.from("✓"));
  const first = sse(one, "\r\n");
  const split = first.indexOf("data: ") + 20;
  const server = await streamStub(() => ({
    stream: [
      ": connected\n\n",
      first.slice(0, split),
      first.slice(split, first.length - 3), // ends between the "\r" and the "\n"
      first.slice(first.length - 3),
      ": heartbeat\n\n",
      twoBytes.subarray(0, check + 1), // ends inside the three bytes of "✓"
      twoBytes.subarray(check + 1),
      sse(three).slice(0, 4),
      sse(three).slice(4),
    ],
  }));
  try {
    const options = streamOptions();
    const stream = tradeUpdates(createRaptorClient(server.url, { token: "t0k3n" }), options);
    assert.equal(stream.lastEventId, undefined);
    const updates = await take(stream, 3);
    assert.deepEqual(ids(updates), ["1", "2", "3"]);
    assert.deepEqual(updates[0], one, "the update as sent, members this version does not type included");
    assert.equal(updates[1]?.reason, "größe ✓");
    assert.equal(updates[2]?.event, "a_type_added_later");
    assert.equal(isKnownTradeEvent(updates[2]?.event), false, "a type added later comes through, unknown");
    assert.equal(isKnownTradeEvent(updates[1]?.event), true);
    assert.equal(stream.lastEventId, "3");
    assert.equal(server.received.length, 1, "heartbeats and split messages made no reconnection");
    assert.deepEqual(options.reconnects, []);
    const [request] = server.received;
    assert.equal(request?.lastEventId, undefined, "the first connection starts from now");
    assert.equal(request?.accept, "text/event-stream");
    assert.equal(request?.authorization, "Bearer t0k3n");
    for (let waited = 0; server.closed < 1 && waited < 100; waited++) await pause(10);
    assert.equal(server.closed, 1, "leaving the loop closed the connection");
    assert.throws(() => stream[Symbol.asyncIterator](), /iterated once/);
  } finally {
    await server.close();
  }
});

/** A stub of the server's resume rule over updates 1..5: after `Last-Event-ID` when the request
 * has one, else from "now" (update 4: what happened while no stream was open is in the lists,
 * not in the stream). The first connection is `first`. */
function resuming(first: StreamStep[]): (request: StreamRequest, n: number) => StreamReply {
  const all = [1, 2, 3, 4, 5].map((n) => tradeUpdate(n));
  return (request, n) => {
    if (n === 0) return { stream: first };
    const after = request.lastEventId === undefined ? 3 : Number(request.lastEventId);
    return { stream: all.filter((u) => Number(u.id) > after).map((u) => sse(u)) };
  };
}

test("tradeUpdates: a connection dropped mid-message resumes with Last-Event-ID, every update once", { timeout: LIMIT }, async () => {
  const server = await streamStub(resuming([sse(tradeUpdate(1)), sse(tradeUpdate(2)), unfinished(tradeUpdate(3)), "drop"]));
  try {
    const options = streamOptions();
    const stream = tradeUpdates(createRaptorClient(server.url), options);
    const updates = await until(stream, through("5"));
    assert.deepEqual(ids(updates), ["1", "2", "3", "4", "5"], "every update, once, in order");
    assert.deepEqual(
      server.received.map((r) => r.lastEventId),
      [undefined, "2"],
      "the reconnection resumes after the last whole message",
    );
    assert.equal(stream.lastEventId, "5");
    assert.equal(options.reconnects.length, 1);
    assert.equal(options.reconnects[0]?.failures, 0, "the first reconnection after a stream that delivered");
    assert.ok(isTransportError(options.reconnects[0]?.error), `a transport error (${String(options.reconnects[0]?.error)})`);
    assert.deepEqual(options.delays, [50], "a random wait under 100 ms");
  } finally {
    await server.close();
  }
});

test("tradeUpdates: a stream the server ends cleanly is resumed with Last-Event-ID", { timeout: LIMIT }, async () => {
  const server = await streamStub(resuming([sse(tradeUpdate(1)), sse(tradeUpdate(2)), unfinished(tradeUpdate(3)), "end"]));
  // A connection that marks its position with an `id:` alone, before any update, and ends.
  const marked = await streamStub(resuming(["id: 2\n\n", "end"]));
  try {
    const options = streamOptions();
    const updates = await until(tradeUpdates(createRaptorClient(server.url), options), through("5"));
    assert.deepEqual(ids(updates), ["1", "2", "3", "4", "5"], "every update, once, in order");
    assert.deepEqual(server.received.map((r) => r.lastEventId), [undefined, "2"]);
    assert.equal(options.reconnects.length, 1);
    assert.equal(options.reconnects[0]?.error, undefined, "no error: the stream ended");
    assert.equal(options.reconnects[0]?.problem, undefined);

    const fromMark = await until(tradeUpdates(createRaptorClient(marked.url), streamOptions()), through("5"));
    assert.deepEqual(ids(fromMark), ["3", "4", "5"], "resumed after the marked position, not from now");
    assert.deepEqual(marked.received.map((r) => r.lastEventId), [undefined, "2"]);
  } finally {
    await Promise.all([server.close(), marked.close()]);
  }
});

test("tradeUpdates: 503 and 429 with Retry-After are waited out, with the stored id", { timeout: LIMIT }, async () => {
  const server = await streamStub(
    streamScript(
      { ...problem(503, "too_many_connections", "same_key"), headers: { "retry-after": "1" } },
      { ...problem(429, "rate_limited", "same_key"), headers: { "retry-after": "2" } },
      { status: 502, body: "<html>bad gateway</html>", contentType: "text/html" },
      { stream: [sse(tradeUpdate(8)), "drop"] },
      { stream: [sse(tradeUpdate(9))] },
    ),
  );
  try {
    const options = streamOptions({ lastEventId: "7", maxAttempts: 4 });
    const stream = tradeUpdates(createRaptorClient(server.url), options);
    assert.equal(stream.lastEventId, "7");
    assert.deepEqual(ids(await until(stream, through("9"))), ["8", "9"]);
    assert.deepEqual(server.received.map((r) => r.lastEventId), ["7", "7", "7", "7", "8"], "each attempt resumes after the last id");
    // Retry-After plus 0.5 x 250 ms; then the backoff, 0.5 x 100 ms x 2^2; a connection that
    // delivered starts the backoff (and maxAttempts' count) over: 0.5 x 100 ms.
    assert.deepEqual(options.delays, [1_125, 2_125, 200, 50]);
    assert.deepEqual(
      options.reconnects.map((r) => [r.failures, r.problem?.error]),
      [
        [1, "too_many_connections"],
        [2, "rate_limited"],
        [3, ""],
        [0, undefined],
      ],
    );
  } finally {
    await server.close();
  }
});

test("tradeUpdates: 410 stream_history_gone throws HistoryGoneError, 401 RefusedError, neither retried; 500 new_key is", { timeout: LIMIT }, async () => {
  const gone = await streamStub(() => problem(410, "stream_history_gone", "no"));
  const unauthenticated = await streamStub(() => problem(401, "unauthenticated", "no"));
  try {
    const options = streamOptions({ lastEventId: "42" });
    const error = await take(tradeUpdates(createRaptorClient(gone.url), options), 1).then(
      () => assert.fail("resolved"),
      (e: unknown) => e,
    );
    assert.ok(error instanceof HistoryGoneError, String(error));
    assert.ok(error instanceof RefusedError, "a refusal: retrying does not help");
    assert.equal(error.lastEventId, "42");
    assert.equal(error.status, 410);
    assert.equal(error.code, "stream_history_gone");
    assert.equal(gone.received.length, 1, "not retried");
    assert.deepEqual(options.delays, []);

    const refused = streamOptions();
    const denied = await take(tradeUpdates(createRaptorClient(unauthenticated.url), refused), 1).then(
      () => assert.fail("resolved"),
      (e: unknown) => e,
    );
    assert.ok(denied instanceof RefusedError && !(denied instanceof HistoryGoneError), String(denied));
    assert.equal(denied.code, "unauthenticated");
    assert.equal(unauthenticated.received.length, 1, "not retried");
    assert.deepEqual(refused.delays, []);

    // `retry: "new_key"` (an internal error) is tried again: a read has no key to spend.
    const internal = await streamStub(streamScript(problem(500, "internal", "new_key"), { stream: [sse(tradeUpdate(1))] }));
    try {
      assert.deepEqual(ids(await take(tradeUpdates(createRaptorClient(internal.url), streamOptions()), 1)), ["1"]);
      assert.equal(internal.received.length, 2);
    } finally {
      await internal.close();
    }
  } finally {
    await Promise.all([gone.close(), unauthenticated.close()]);
  }
});

test("tradeUpdates: a connection silent past idleTimeoutMs is replaced; heartbeats keep one alive", { timeout: LIMIT }, async () => {
  const heartbeats = Array.from({ length: 6 }, () => [{ pauseMs: 100 }, ": heartbeat\n\n"]).flat();
  const server = await streamStub((request, n) => {
    if (n === 0) return { stream: [sse(tradeUpdate(1)), ...heartbeats, sse(tradeUpdate(2))] };
    return { stream: [sse(tradeUpdate(Number(request.lastEventId) + 1))] };
  });
  try {
    const options = streamOptions({ idleTimeoutMs: 300, onConnect: () => void afterCollection() });
    const updates = await take(tradeUpdates(createRaptorClient(server.url), options), 3);
    assert.deepEqual(ids(updates), ["1", "2", "3"]);
    assert.deepEqual(
      server.received.map((r) => r.lastEventId),
      [undefined, "2"],
      "600 ms of heartbeats 100 ms apart kept the first connection; 300 ms of nothing ended it",
    );
    assert.match(String(options.reconnects[0]?.error), /no byte for 300 ms/);
  } finally {
    await server.close();
  }
});

test("tradeUpdates: maxAttempts and deadlineMs give up with GaveUpError; the signal ends the loop", { timeout: LIMIT }, async () => {
  const dropping = await streamStub(() => "drop");
  const quiet = await streamStub(() => ({ stream: [": connected\n\n"] }));
  const hanging = await streamStub(() => "hang");
  try {
    const capped = streamOptions({ maxAttempts: 3, random: () => 0.999 });
    const error = await take(tradeUpdates(createRaptorClient(dropping.url), capped), 1).then(
      () => assert.fail("resolved"),
      (e: unknown) => e,
    );
    assert.ok(error instanceof GaveUpError, String(error));
    assert.equal(error.attempts, 3);
    assert.equal(dropping.received.length, 3);
    assert.ok(isTransportError(error.cause), `cause: ${String(error.cause)}`);
    assert.deepEqual(capped.delays.map((d) => Math.round(d / 0.999)), [100, 200], "doubling backoff between attempts");

    let clock = 0;
    const timed = streamOptions({ deadlineMs: 1_000, random: () => 0.999, now: () => clock });
    timed.sleep = async (ms) => {
      timed.delays.push(ms);
      if (timed.delays.length >= 50) throw new Error("50 reconnections: the deadline never came");
      clock += ms;
    };
    await assert.rejects(take(tradeUpdates(createRaptorClient(dropping.url), timed), 1), GaveUpError);
    assert.ok(timed.delays.reduce((a, b) => a + b, 0) <= 1_000, `never sleeps past the deadline (${timed.delays.join(", ")})`);

    // The abort comes after a garbage collection, as it may in a long-lived app.
    const controller = new AbortController();
    const stopped = streamOptions({
      signal: controller.signal,
      onConnect: () => void afterCollection().then(() => controller.abort()),
    });
    assert.deepEqual(await take(tradeUpdates(createRaptorClient(quiet.url), stopped), 1), [], "the loop ends without an error");
    assert.equal(quiet.received.length, 1);
    for (let waited = 0; quiet.closed < 1 && waited < 100; waited++) await pause(10);
    assert.equal(quiet.closed, 1, "the abort closed the connection");

    // An abort while the answer has not begun ends the loop as quietly.
    const waiting = new AbortController();
    setTimeout(() => waiting.abort(), 100);
    assert.deepEqual(await take(tradeUpdates(createRaptorClient(hanging.url), streamOptions({ signal: waiting.signal })), 1), []);
    assert.equal(hanging.received.length, 1);
  } finally {
    await Promise.all([dropping.close(), quiet.close(), hanging.close()]);
  }
});
