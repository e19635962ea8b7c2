// Antlers' journey against a real Raptor server (make client-e2e): an operator, quotes, a keyed
// market order and its replay, a LEAPS covered call opened and rolled, a resting order
// canceled, a position closed, the account, positions, orders and the export read; then, when
// RAPTOR_PROXY_URL names scripts/dropping-proxy.py in front of the server, keyed orders placed
// with the SDK's withRetries through it, each answer lost once, and counted; last, the
// trade-updates stream (tradeUpdates) through a relay that cuts it after its first message: a
// market order's `new` and `fill`, the second after a resume with Last-Event-ID, then again from
// a new iterator given the first's id. Every response is checked against the document the
// server serves (status, media type, error code); statuses and codes are switched on
// exhaustively.
//
//   RAPTOR_URL=http://127.0.0.1:PORT RAPTOR_BIN=target/debug/raptor DATABASE_URL=… \
//     [RAPTOR_PROXY_URL=http://127.0.0.1:PROXY_PORT] node dist/journey.js

import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { connect, createServer, type AddressInfo, type Socket } from "node:net";

import createClient from "openapi-fetch";

import {
  ContractError,
  contractCheck,
  isOpen,
  retryAdvice,
  signOf,
  wireRetry,
  type Advice,
  type DeclaredStatus,
  type ErrorCode,
  type Method,
  type OpenApiDocument,
  type OrderResponse,
  type Retry,
  type Schemas,
  type Seen,
} from "./contract.js";
import type { paths } from "./schema.js";
import { HistoryGoneError, createRaptorClient, pages, tradeUpdates, withRetries, type TradeUpdate } from "./sdk.js";

function env(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
}

function check(condition: boolean, what: string): asserts condition {
  if (!condition) throw new Error(`check failed: ${what}`);
}

function step(text: string): void {
  console.log(`journey: ${text}`);
}

/** The response's status is `expected`, which must be one the document declares for the
 * operation (a status it lacks does not compile). */
function expectStatus<P extends keyof paths, M extends Method>(
  response: Response,
  _path: P,
  _method: M,
  expected: DeclaredStatus<P, M>,
): void {
  check(response.status === expected, `${_method.toUpperCase()} ${_path}: status ${response.status}, expected ${expected}`);
}

function success<T>(label: string, result: { data?: T; error?: unknown; response: Response }): T {
  if (result.data === undefined || !result.response.ok) {
    throw new Error(`${label}: ${result.response.status} ${JSON.stringify(result.error)}`);
  }
  return result.data;
}

/** The error body's code, narrowed to the operation's declared codes (the middleware has
 * already checked it at run time against the document), after checking that its `retry` is the
 * one the recipe gives the code. */
function errorCode<C>(
  label: string,
  result: { error?: { error: C; retry: Retry }; response: Response },
): C {
  const code = result.error?.error;
  if (typeof code !== "string") {
    throw new ContractError(`${label}: expected an error, got ${result.response.status}`);
  }
  const expected = wireRetry(retryAdvice(code as unknown as ErrorCode));
  if (result.error?.retry !== expected) {
    throw new ContractError(`${label}: ${code} says retry ${result.error?.retry}, the recipe ${expected}`);
  }
  return code;
}

function expectAdvice(code: Parameters<typeof retryAdvice>[0], advice: Advice): void {
  check(retryAdvice(code) === advice, `${code} means ${advice}`);
}

/** Decimal strings to cents (exact; the API never sends more than 2 places for money). */
function cents(text: string): bigint {
  const match = /^(-?)(\d+)(?:\.(\d{1,2}))?$/.exec(text);
  if (!match) throw new ContractError(`${text} is not a money decimal`);
  const value = BigInt(match[2]!) * 100n + BigInt((match[3] ?? "0").padEnd(2, "0"));
  return match[1] === "-" ? -value : value;
}

/** A compact OCC call symbol on XYZ. */
function call(yearsAhead: number, monthDay: string, strike: number): string {
  const yy = String((new Date().getUTCFullYear() + yearsAhead) % 100).padStart(2, "0");
  return `XYZ${yy}${monthDay}C${String(Math.round(strike * 1000)).padStart(8, "0")}`;
}

/**
 * A TCP relay to the server that cuts the first event stream it carries right after the stream's
 * first whole message, as a network that drops a connection mid-stream does; later connections
 * pass untouched. It records each request's `Last-Event-ID`.
 *
 * The stream does not go through scripts/dropping-proxy.py: that proxy reads each answer to its
 * end before passing it on or dropping it, and a stream's answer has no end, so nothing would
 * ever come through. This relay drops the stream's connection instead, which is the failure a
 * stream meets.
 */
async function cuttingRelay(base: string) {
  const upstream = new URL(base);
  const lastEventIds: (string | undefined)[] = [];
  const sockets = new Set<Socket>();
  let cuts = 0;
  const server = createServer((client) => {
    const origin = connect(Number(upstream.port), upstream.hostname);
    sockets.add(client).add(origin);
    const drop = () => {
      client.destroy();
      origin.destroy();
    };
    client.on("error", drop).on("close", drop);
    origin.on("error", drop).on("close", drop);
    let head = "";
    client.on("data", (bytes: Buffer) => {
      if (!head.includes("\r\n\r\n")) {
        head += bytes.toString("latin1");
        if (head.includes("\r\n\r\n")) lastEventIds.push(/^last-event-id:\s*(.*?)\s*$/im.exec(head)?.[1]);
      }
      origin.write(bytes);
    });
    // The answer's bytes so far (until this connection is cut, or known not to be cut).
    let answer: Buffer | undefined = cuts === 0 ? Buffer.alloc(0) : undefined;
    origin.on("data", (bytes: Buffer) => {
      if (answer === undefined || cuts > 0) {
        client.write(bytes);
        return;
      }
      answer = Buffer.concat([answer, bytes]);
      // The first message ends at the first blank line after a data line (chunked framing
      // uses CRLF, the server's messages LF).
      const data = answer.indexOf("\ndata: ");
      const end = data === -1 ? -1 : answer.indexOf("\n\n", data);
      if (end === -1) {
        client.write(bytes);
        return;
      }
      const sent = answer.length - bytes.length;
      client.write(bytes.subarray(0, end + 2 - sent), () => drop());
      cuts++;
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    lastEventIds,
    cuts: () => cuts,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

async function main(): Promise<void> {
  const base = env("RAPTOR_URL");
  const bin = env("RAPTOR_BIN");

  // The document the types were generated from is the one the server serves.
  const served = await fetch(`${base}/openapi.json`);
  check(served.status === 200, "GET /openapi.json answers 200");
  const text = await served.text();
  const onDisk = readFileSync(new URL("../../../openapi/openapi.json", import.meta.url), "utf8");
  check(text === onDisk, "the served /openapi.json is openapi/openapi.json");
  const doc = JSON.parse(text) as OpenApiDocument;
  const seen: Seen[] = [];

  step("an operator from the CLI (raptor users create --role operator)");
  const email = `antlers-${randomUUID()}@example.com`;
  const created = JSON.parse(
    execFileSync(bin, ["users", "create", "--email", email, "--role", "operator"], { encoding: "utf8" }),
  ) as { user_id: number; token: string };
  check(typeof created.token === "string" && created.token.length > 0, "the CLI printed a token");

  const api = createClient<paths>({ baseUrl: base });
  api.use(contractCheck(doc, seen));
  api.use({
    onRequest({ request }) {
      request.headers.set("authorization", `Bearer ${created.token}`);
      return request;
    },
  });
  const anonymous = createClient<paths>({ baseUrl: base });
  anonymous.use(contractCheck(doc, seen));

  step("no token: 401 unauthenticated");
  {
    const r = await anonymous.GET("/api/trading/account");
    expectStatus(r.response, "/api/trading/account", "get", 401);
    const code = errorCode("GET /api/trading/account", r);
    check(code === "unauthenticated", code);
    expectAdvice(code, "sign_in");
    check(r.response.headers.get("www-authenticate") === "Bearer", "WWW-Authenticate: Bearer");
  }

  step("the paper account");
  const start = success("account", await api.GET("/api/trading/account"));
  check(start.mode === "paper" && start.currency === "USD", "a USD paper account");
  const startCash = cents(start.cash);

  async function quote(symbol: string, bid: string, ask: string): Promise<void> {
    const r = await api.PUT("/api/admin/quotes/{symbol}", { params: { path: { symbol } }, body: { bid, ask } });
    expectStatus(r.response, "/api/admin/quotes/{symbol}", "put", 200);
    const q = success(`quote ${symbol}`, r);
    check(q.symbol === symbol && q.bid === bid && q.ask === ask, `quote ${symbol} stored`);
  }

  async function place(body: Schemas["CreateOrderRequest"], key = randomUUID()) {
    return api.POST("/api/trading/orders", { params: { header: { "Idempotency-Key": key } }, body });
  }

  function filled(label: string, order: OrderResponse, price: string): void {
    check(!isOpen(order.status) && order.status === "filled", `${label} filled (${order.status})`);
    check(order.filled_avg_price === price, `${label} at ${price} (got ${order.filled_avg_price})`);
  }

  step("quotes: AAPL 189.90 / 190.10");
  await quote("AAPL", "189.90", "190.10");

  step("a keyed market order, then its retry with the same key (a replay)");
  const key = randomUUID();
  const buy: Schemas["CreateOrderRequest"] = { symbol: "AAPL", qty: "1", side: "buy", type: "market" };
  const first = await place(buy, key);
  expectStatus(first.response, "/api/trading/orders", "post", 201);
  const order = success("order", first);
  filled("AAPL buy", order, "190.10");
  check(first.response.headers.get("idempotent-replayed") === "false", "a fresh answer: Idempotent-Replayed: false");
  check(order.idempotency_replayed === undefined, "no replay marker on the original");
  const location = first.response.headers.get("location");
  check(location === `/api/trading/orders/${order.id}`, `Location names the order (${location})`);

  const retry = await place(buy, key);
  expectStatus(retry.response, "/api/trading/orders", "post", 201);
  const replayed = success("replay", retry);
  check(retry.response.headers.get("idempotent-replayed") === "true", "Idempotent-Replayed: true");
  check(replayed.idempotency_replayed === true, "idempotency_replayed: true in the body");
  check(replayed.id === order.id && replayed.status === order.status, "the same order");
  check(retry.response.headers.get("location") === location, "the same Location");

  step("the same key with another body: 422 idempotency_key_body_mismatch");
  {
    const r = await place({ ...buy, qty: "2" }, key);
    expectStatus(r.response, "/api/trading/orders", "post", 422);
    const code = errorCode("mismatch", r);
    check(code === "idempotency_key_body_mismatch", code);
    expectAdvice(code, "new_key");
  }

  step("LEAPS covered call: long the LEAPS, short a near call");
  const leaps = call(2, "0121", 50);
  const near = call(1, "0618", 65);
  const next = call(1, "0716", 67.5);
  await quote(leaps, "12.30", "12.40");
  await quote(near, "1.20", "1.25");
  {
    const r = await place({ symbol: leaps, qty: "1", side: "buy", type: "market", position_intent: "buy_to_open" });
    expectStatus(r.response, "/api/trading/orders", "post", 201);
    filled("LEAPS buy to open", success("leaps", r), "12.40");
  }
  {
    const r = await place({ symbol: near, qty: "1", side: "sell", type: "market", position_intent: "sell_to_open" });
    expectStatus(r.response, "/api/trading/orders", "post", 201);
    filled("near call sell to open", success("short", r), "1.20");
  }

  step("a second short call is uncovered: 403 uncovered_short_option");
  await quote(next, "1.30", "1.35");
  {
    const r = await place({ symbol: next, qty: "1", side: "sell", type: "market", position_intent: "sell_to_open" });
    expectStatus(r.response, "/api/trading/orders", "post", 403);
    const code = errorCode("uncovered", r);
    check(code === "uncovered_short_option", code);
    expectAdvice(code, "final");
  }

  step(`roll the short call ${near} -> ${next} (and replay the roll)`);
  await quote(near, "0.40", "0.45");
  const rollKey = randomUUID();
  const roll = () =>
    api.POST("/api/trading/positions/{symbol}/roll", {
      params: { path: { symbol: near }, header: { "Idempotency-Key": rollKey } },
      body: { to_symbol: next, qty: "1" },
    });
  const rolled = await roll();
  expectStatus(rolled.response, "/api/trading/positions/{symbol}/roll", "post", 201);
  const rollOrder = success("roll", rolled);
  check(rollOrder.purpose === "roll" && rollOrder.order_class === "mleg", "a multi-leg roll order");
  filled("roll", rollOrder, "-0.85");
  check(rollOrder.legs.length === 2, "two legs");
  const [closeLeg, openLeg] = rollOrder.legs;
  check(closeLeg?.symbol === near && closeLeg.position_intent === "buy_to_close", "leg 1 buys to close");
  check(openLeg?.symbol === next && openLeg.position_intent === "sell_to_open", "leg 2 sells to open");
  for (const leg of rollOrder.legs) check(!isOpen(leg.status), `leg ${leg.symbol} done`);
  const rollAgain = await roll();
  expectStatus(rollAgain.response, "/api/trading/positions/{symbol}/roll", "post", 201);
  check(rollAgain.response.headers.get("idempotent-replayed") === "true", "the roll replayed");
  check(success("roll replay", rollAgain).id === rollOrder.id, "the same roll order");

  step("a resting limit order, canceled (twice: cancel is idempotent)");
  const resting = success(
    "resting",
    await place({ symbol: "AAPL", qty: "1", side: "buy", type: "limit", limit_price: "100.00", time_in_force: "gtc" }),
  );
  check(isOpen(resting.status), `a limit below the ask rests (${resting.status})`);
  {
    const open = success("open orders", await api.GET("/api/trading/orders", { params: { query: { status: "open" } } })).data;
    check(open.some((o) => o.id === resting.id) && open.every((o) => isOpen(o.status)), "listed as open");
    const account = success("account", await api.GET("/api/trading/account"));
    check(cents(account.reserved_cash) === 10000n, `100.00 reserved (${account.reserved_cash})`);
  }
  for (const attempt of [1, 2]) {
    const r = await api.DELETE("/api/trading/orders/{id}", { params: { path: { id: resting.id } } });
    expectStatus(r.response, "/api/trading/orders/{id}", "delete", 200);
    const canceled = success(`cancel ${attempt}`, r);
    check(canceled.status === "canceled" && !isOpen(canceled.status), `canceled (${canceled.status})`);
  }

  step("close the AAPL position at market");
  {
    const r = await api.POST("/api/trading/positions/{symbol}/close", {
      params: { path: { symbol: "AAPL" }, header: { "Idempotency-Key": randomUUID() } },
      body: {},
    });
    expectStatus(r.response, "/api/trading/positions/{symbol}/close", "post", 201);
    const closing = success("close", r);
    check(closing.purpose === "close", "a closing order");
    filled("AAPL close", closing, "189.90");
  }

  step("account, positions and orders");
  const account = success("account", await api.GET("/api/trading/account"));
  // -190.10 + 189.90 (AAPL) - 1240.00 (LEAPS) + 120.00 (short) + 85.00 (roll credit)
  const expectedCash = startCash - 19010n + 18990n - 124000n + 12000n + 8500n;
  check(cents(account.cash) === expectedCash, `cash ${account.cash}`);
  check(cents(account.reserved_cash) === 0n && account.buying_power === account.cash, "nothing reserved");
  check(cents(account.realized_pnl) === -20n + 7500n, `realized P&L ${account.realized_pnl}`);
  check(
    cents(account.equity) === cents(account.cash) + cents(account.market_value),
    `equity ${account.equity} = cash ${account.cash} + market value ${account.market_value}`,
  );
  check(Array.isArray(account.marked_at_cost) && typeof account.unrealized_pnl === "string", "marks");

  {
    const one = await api.GET("/api/trading/positions/{symbol}", { params: { path: { symbol: leaps } } });
    expectStatus(one.response, "/api/trading/positions/{symbol}", "get", 200);
    check(Number(success("one position", one).qty) === 1, "one position by symbol");
    const none = await api.GET("/api/trading/positions/{symbol}", { params: { path: { symbol: "AAPL" } } });
    expectStatus(none.response, "/api/trading/positions/{symbol}", "get", 404);
    check(errorCode("closed position", none) === "not_found", "a closed position is not found");
    const quote = await api.GET("/api/trading/quotes/{symbol}", { params: { path: { symbol: "AAPL" } } });
    expectStatus(quote.response, "/api/trading/quotes/{symbol}", "get", 200);
    const q = success("quote", quote);
    check(q.symbol === "AAPL" && Number(q.bid) <= Number(q.ask), `a quote (${q.bid}/${q.ask})`);
    const unquoted = await api.GET("/api/trading/quotes/{symbol}", { params: { path: { symbol: "ZZZZ" } } });
    expectStatus(unquoted.response, "/api/trading/quotes/{symbol}", "get", 404);
    check(errorCode("unquoted", unquoted) === "quote_unavailable", "no quote: 404 quote_unavailable");
  }
  const positions = success("positions", await api.GET("/api/trading/positions"));
  const held = new Map(positions.map((p) => [p.symbol, p]));
  check(held.size === 2, `two positions (${[...held.keys()].join(", ")})`);
  for (const [symbol, qty] of [[leaps, 1], [next, -1]] as const) {
    const p = held.get(symbol);
    check(p !== undefined && Number(p.qty) === qty && signOf(p.side) === Math.sign(qty), `${symbol} ${qty}`);
  }

  // History pages: two at a time, following next_cursor until has_more is false.
  const orders: OrderResponse[] = [];
  for (let cursor: string | undefined, pages = 0; ; pages++) {
    check(pages < 10, "paging ends");
    const page = success(
      "orders page",
      await api.GET("/api/trading/orders", { params: { query: { status: "all", limit: 2, ...(cursor ? { cursor } : {}) } } }),
    );
    orders.push(...page.data);
    if (!page.has_more) {
      check(page.next_cursor === null, "the last page has no cursor");
      break;
    }
    check(page.next_cursor !== null, "a page with more has a cursor");
    cursor = page.next_cursor;
  }
  const open = orders.filter((o) => isOpen(o.status));
  check(orders.length === 6 && open.length === 0, `6 orders, none open (${orders.length}, ${open.length})`);
  check(new Set(orders.map((o) => o.id)).size === 6, "no order on two pages");
  {
    const r = await api.GET("/api/trading/orders", { params: { query: { cursor: "not-a-cursor" } } });
    expectStatus(r.response, "/api/trading/orders", "get", 400);
    const code = errorCode("bad cursor", r);
    check(code === "invalid_query", code);
  }
  {
    const r = await api.GET("/api/trading/orders/by-client-order-id/{client_order_id}", {
      params: { path: { client_order_id: order.client_order_id } },
    });
    expectStatus(r.response, "/api/trading/orders/by-client-order-id/{client_order_id}", "get", 200);
    check(success("order by client_order_id", r).id === order.id, "the order by its client_order_id");
    const missing = await api.GET("/api/trading/orders/by-client-order-id/{client_order_id}", {
      params: { path: { client_order_id: `unknown-${randomUUID()}` } },
    });
    expectStatus(missing.response, "/api/trading/orders/by-client-order-id/{client_order_id}", "get", 404);
    check(errorCode("unknown client_order_id", missing) === "not_found", "404 not_found");
  }
  const one = success("order", await api.GET("/api/trading/orders/{id}", { params: { path: { id: order.id } } }));
  check(one.id === order.id && one.status === "filled", "an order by id");
  {
    const r = await api.GET("/api/trading/orders/{id}", { params: { path: { id: randomUUID() } } });
    expectStatus(r.response, "/api/trading/orders/{id}", "get", 404);
    const code = errorCode("unknown order", r);
    check(code === "not_found", code);
    expectAdvice(code, "final");
  }

  step("activities (GET /api/trading/activities)");
  {
    const r = await api.GET("/api/trading/activities", { params: { query: { limit: 500 } } });
    expectStatus(r.response, "/api/trading/activities", "get", 200);
    const feed = success("activities", r);
    const fills = feed.data.filter((a) => a.type === "fill");
    const cancels = feed.data.filter((a) => a.type === "cancel");
    check(fills.some((a) => a.order_id === order.id), "the first order's fill is in the feed");
    check(cancels.some((a) => a.order_id === resting.id), "the cancel is in the feed");
    check(!feed.has_more && feed.next_cursor === null, "one page");
  }

  step("subscription (GET /api/billing/subscription): none yet");
  {
    const r = await api.GET("/api/billing/subscription");
    expectStatus(r.response, "/api/billing/subscription", "get", 404);
    check(errorCode("no subscription", r) === "not_found", "404 not_found without a subscription");
  }

  step("export (GET /api/account/export)");
  {
    const r = await api.GET("/api/account/export");
    expectStatus(r.response, "/api/account/export", "get", 200);
    const exported: unknown = success("export", r);
    check(typeof exported === "object" && exported !== null, "an object");
    const dump = JSON.stringify(exported);
    check(dump.includes(email), "holds the user's email");
    check(dump.includes(order.id), "holds the orders");
  }

  const proxy = process.env["RAPTOR_PROXY_URL"];
  if (proxy) {
    step("through a proxy that drops the first answer: 3 keyed orders with withRetries, paged history, the account");
    // The proxy forwards every request and loses the first answer of each (the server executed
    // it): only a client that retries with the same key ends with one order per operation.
    const proxied = createRaptorClient(proxy, { token: created.token });
    proxied.use(contractCheck(doc, seen));
    const tag = `proxy-${randomUUID()}`;
    const placed: OrderResponse[] = [];
    let attempts = 0;
    for (let n = 1; n <= 3; n++) {
      // One logical operation each: withRetries makes its key and keeps it across attempts.
      const body: Schemas["CreateOrderRequest"] = { ...buy, client_order_id: `${tag}-${n}` };
      let tries = 0;
      const placedOrder = await withRetries((key, { signal }) => {
        tries++;
        return proxied.POST("/api/trading/orders", { params: { header: { "Idempotency-Key": key } }, body, signal });
      });
      attempts += tries;
      check(tries >= 2, `order ${n}: the first answer was lost and the request sent again (${tries} attempts)`);
      check(placedOrder.idempotency_replayed === true, `order ${n}: the answer is the stored outcome of the first attempt`);
      check(placedOrder.client_order_id === body.client_order_id, `order ${n}: its client_order_id`);
      filled(`proxied AAPL buy ${n}`, placedOrder, "190.10");
      placed.push(placedOrder);
    }
    check(new Set(placed.map((o) => o.id)).size === 3, "three operations, three orders");

    // The history through the proxy: every page request is lost once and retried (a read).
    let pageRequests = 0;
    const listed: OrderResponse[] = [];
    for await (const listedOrder of pages((cursor) =>
      withRetries((_key, { signal }) => {
        pageRequests++;
        return proxied.GET("/api/trading/orders", { params: { query: { status: "all", limit: 2, ...(cursor ? { cursor } : {}) } }, signal });
      }),
    )) {
      listed.push(listedOrder);
    }
    const mine = listed.filter((o) => o.client_order_id.startsWith(`${tag}-`));
    check(mine.length === 3, `exactly 3 orders from this phase, 0 duplicates (${mine.length})`);
    check(
      JSON.stringify(mine.map((o) => o.id).sort()) === JSON.stringify(placed.map((o) => o.id).sort()),
      "the listed orders are the 3 placed",
    );
    check(listed.length === orders.length + 3, `${orders.length} + 3 orders in all (${listed.length})`);
    check(new Set(listed.map((o) => o.id)).size === listed.length, "no order on two pages");

    const after = await withRetries((_key, { signal }) => proxied.GET("/api/trading/account", { signal }));
    check(cents(after.cash) === cents(account.cash) - 3n * 19010n, `cash ${account.cash} - 3 x 190.10 = ${after.cash}`);
    const aapl = await withRetries((_key, { signal }) =>
      proxied.GET("/api/trading/positions/{symbol}", { params: { path: { symbol: "AAPL" } }, signal }),
    );
    check(Number(aapl.qty) === 3 && signOf(aapl.side) === 1, `AAPL long 3 (${aapl.qty})`);

    const statsAnswer = await fetch(`${proxy}/__proxy/stats`);
    check(statsAnswer.status === 200, "GET /__proxy/stats answers 200");
    const stats = (await statsAnswer.json()) as { dropped: number; forwarded: number };
    check(stats.dropped >= 3, `the proxy dropped at least 3 answers (${stats.dropped})`);
    console.log(
      `journey: through the dropping proxy: 3 orders in ${attempts} attempts, ${mine.length} created (0 duplicates), ` +
        `${listed.length} orders listed in ${pageRequests} page requests, cash ${account.cash} -> ${after.cash}; ` +
        `proxy dropped ${stats.dropped}, forwarded ${stats.forwarded}`,
    );
  } else {
    step("RAPTOR_PROXY_URL is not set: the dropping-proxy phase is skipped");
  }

  step("the trade-updates stream: a market order's new and fill, the stream cut after the first; then resumed from it");
  {
    const relay = await cuttingRelay(base);
    const cut = createRaptorClient(relay.url, { token: created.token });
    cut.use(contractCheck(doc, seen));
    const direct = createRaptorClient(base, { token: created.token });
    direct.use(contractCheck(doc, seen));
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new Error("no fill event within 30 s")), 30_000);
    try {
      const clientOrderId = `stream-${randomUUID()}`;
      let opened: () => void = () => {};
      const open = new Promise<void>((resolve) => (opened = resolve));
      const stream = tradeUpdates(cut, { signal: controller.signal, onConnect: () => opened() });
      const received: TradeUpdate[] = [];
      const reading = (async () => {
        for await (const update of stream) {
          received.push(update);
          if (update.event === "fill" && update.order?.client_order_id === clientOrderId) break;
        }
      })();
      // A stream without Last-Event-ID starts with what happens after it opens: the order is
      // placed once the server has answered the stream's request.
      await Promise.race([open, reading]);
      const r = await place({ ...buy, client_order_id: clientOrderId });
      expectStatus(r.response, "/api/trading/orders", "post", 201);
      const placed = success("streamed order", r);
      await reading;
      check(!controller.signal.aborted, String(controller.signal.reason));
      const mine = received.filter((u) => u.order?.id === placed.id);
      check(
        JSON.stringify(mine.map((u) => u.event)) === JSON.stringify(["new", "fill"]),
        `the order's events: new, fill (${mine.map((u) => `${u.id}:${u.event}`).join(", ")}; all: ${received.length})`,
      );
      const [accepted, fill] = mine as [TradeUpdate, TradeUpdate];
      check(BigInt(fill.id) > BigInt(accepted.id), `ids increase (${accepted.id} < ${fill.id})`);
      // Compared as numbers: the event's price is the audit row's decimal, which may carry more
      // places than the order's money fields (e.g. "190.100000").
      check(
        Number(fill.price) === 190.1 && Number(fill.qty) === 1 && fill.symbol === "AAPL",
        `the fill: 1 AAPL at 190.10 (${fill.qty} ${fill.symbol} at ${fill.price})`,
      );
      check(fill.order?.status === "filled", `the fill's order is filled (${fill.order?.status})`);
      check(relay.cuts() === 1, "the relay cut the stream once");
      check(
        JSON.stringify(relay.lastEventIds) === JSON.stringify([undefined, accepted.id]),
        `the reconnection resumed after the first event (Last-Event-ID per connection: ${JSON.stringify(relay.lastEventIds)})`,
      );
      check(stream.lastEventId === fill.id, `lastEventId is the fill's (${stream.lastEventId})`);

      const resumed: TradeUpdate[] = [];
      for await (const update of tradeUpdates(direct, { lastEventId: accepted.id, signal: controller.signal })) {
        resumed.push(update);
        break;
      }
      check(
        resumed[0]?.id === fill.id && resumed[0].event === "fill" && resumed[0].order?.id === placed.id,
        `a new iterator from the first event's id starts with the fill (${resumed[0]?.id}:${resumed[0]?.event})`,
      );

      const gone = await (async () => {
        for await (const _ of tradeUpdates(direct, { lastEventId: "999999999999", signal: controller.signal })) void _;
      })().then(
        () => undefined,
        (error: unknown) => error,
      );
      check(gone instanceof HistoryGoneError && gone.code === "stream_history_gone", `an id never sent: HistoryGoneError (${String(gone)})`);
      console.log(
        `journey: stream: ${accepted.id} new, ${fill.id} fill of ${placed.id}; cut after the first, resumed with ` +
          `Last-Event-ID ${relay.lastEventIds[1]}; a new iterator from ${accepted.id} began with ${resumed[0]?.id}`,
      );
    } finally {
      clearTimeout(timer);
      controller.abort();
      await relay.close();
    }
  }

  const operations = new Set(seen.map((s) => s.operation));
  console.log(
    `journey: ok: ${seen.length} responses checked against the document, ` +
      `${operations.size} operations: ${[...operations].sort().join("; ")}`,
  );
}

main().catch((error: unknown) => {
  console.error(`journey: FAILED: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exit(1);
});
