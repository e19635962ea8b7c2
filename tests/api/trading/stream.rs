//! The trade-updates stream (`GET /api/trading/stream`): an event per change of the user's
//! orders, woken by the database's NOTIFY on any replica, resumable with `Last-Event-ID` with
//! no gap and no duplicate, bounded per user, ended by the drain.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use http_body_util::BodyExt;
use raptor_api::codes::ErrorCode;
use raptor_api::trading::stream::StreamLimits;
use raptor_api::ApiConfig;
use raptor_integration_tests::sse::{Item, Parser};
use serde_json::Value;
use sqlx::PgPool;
use tower::ServiceExt;
use uuid::Uuid;

use crate::helpers::{assert_problem, read_response, Options, Order, TestApp, TestResponse};

/// One server-sent message.
#[derive(Debug, Clone)]
struct Message {
    id: String,
    event: String,
    data: Value,
}

/// An open stream, read message by message.
struct Events {
    body: Body,
    parser: Parser,
    /// Bytes received and not yet parsed.
    unread: VecDeque<u8>,
    /// Items parsed and not yet taken.
    items: VecDeque<Item>,
}

/// What reading a stream found.
#[derive(Debug)]
enum Next {
    Message(Message),
    /// Nothing within the wait.
    Quiet,
    /// The server ended the stream.
    Ended,
}

impl Events {
    fn new(body: Body) -> Self {
        Self {
            body,
            parser: Parser::default(),
            unread: VecDeque::new(),
            items: VecDeque::new(),
        }
    }

    /// The next frame's bytes into `unread`, within `wait`: false when the stream ended.
    async fn receive(&mut self, wait: Duration) -> Result<bool, tokio::time::error::Elapsed> {
        match tokio::time::timeout(wait, self.body.frame()).await? {
            None | Some(Err(_)) => Ok(false),
            Some(Ok(frame)) => {
                if let Ok(bytes) = frame.into_data() {
                    self.unread.extend(bytes);
                }
                Ok(true)
            }
        }
    }

    /// Parses what is unread.
    fn parse(&mut self) {
        let mut items = Vec::new();
        let (front, back) = self.unread.as_slices();
        self.parser.feed(front, &mut items);
        self.parser.feed(back, &mut items);
        self.unread.clear();
        self.items.extend(items);
    }

    /// The next message within `wait` (comment lines, the heartbeats, are skipped).
    async fn next(&mut self, wait: Duration) -> Next {
        let until = Instant::now() + wait;
        loop {
            self.parse();
            while let Some(item) = self.items.pop_front() {
                if let Item::Message { id, event, data } = item {
                    return Next::Message(Message {
                        id: id.unwrap_or_default(),
                        event,
                        data: serde_json::from_str(&data).expect("data is JSON"),
                    });
                }
            }
            let left = until.saturating_duration_since(Instant::now());
            match self.receive(left).await {
                Err(_) => return Next::Quiet,
                Ok(false) => return Next::Ended,
                Ok(true) => {}
            }
        }
    }

    /// The position a stream announces first: the `id` of a message without data.
    async fn position(&mut self) -> String {
        // Byte by byte up to the end of the first message, so that what follows stays unread.
        let mut items = Vec::new();
        while self.parser.blocks() == 0 {
            match self.unread.pop_front() {
                Some(byte) => self.parser.feed(&[byte], &mut items),
                None => {
                    let open = self
                        .receive(Duration::from_secs(2))
                        .await
                        .expect("the first message in time");
                    assert!(open, "the stream is open");
                }
            }
        }
        assert!(
            !items
                .iter()
                .any(|item| matches!(item, Item::Message { .. })),
            "the first message has data: {items:?}"
        );
        self.parser
            .last_event_id()
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("the first message has no id: {items:?}"))
    }

    /// The next message, which must come within `wait`.
    async fn expect(&mut self, wait: Duration) -> Message {
        match self.next(wait).await {
            Next::Message(message) => message,
            other => panic!("no message within {wait:?}: {other:?}"),
        }
    }
}

/// Opens the stream of `token` on `app`, resuming after `last` when given: the stream, or the
/// refusal.
async fn open(app: &TestApp, token: &str, last: Option<&str>) -> Result<Events, TestResponse> {
    let mut request = Request::get("/api/trading/stream")
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .header(header::ACCEPT, "text/event-stream");
    if let Some(last) = last {
        request = request.header("last-event-id", last);
    }
    let response = app
        .router
        .clone()
        .oneshot(request.body(Body::empty()).expect("request"))
        .await
        .expect("infallible");
    if response.status() != StatusCode::OK {
        return Err(read_response("GET /api/trading/stream".to_owned(), response).await);
    }
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "text/event-stream",
        "{:?}",
        response.headers()
    );
    Ok(Events::new(response.into_body()))
}

/// A resting order filled by a quote set through one replica reaches the user's stream on
/// another replica within a second (the database's NOTIFY wakes it), as a `fill` with the
/// order, filled, and the fill's price and quantity.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_fill_on_one_replica_reaches_a_stream_on_another(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let other = app.replica(Options::default()).await;
        let (_, token) = app.user("stream@example.com").await;
        app.quote("AAPL", "101.00", "102.00").await;
        let resting = app
            .create_order(
                &token,
                Uuid::new_v4(),
                &Order::limit("AAPL", "100.00").buy().qty("3").gtc().json(),
            )
            .await;
        assert_eq!(resting.body["status"], "new", "{}", resting.text);
        let mut events = open(&other, &token, None).await.expect("stream");
        // What happened before it opened is not replayed.
        assert!(matches!(
            events.next(Duration::from_millis(300)).await,
            Next::Quiet
        ));

        let crossed = Instant::now();
        app.quote("AAPL", "98.00", "99.00").await;
        let fill = events.expect(Duration::from_secs(1)).await;
        assert!(
            crossed.elapsed() < Duration::from_secs(1),
            "{:?}",
            crossed.elapsed()
        );
        assert_eq!(fill.event, "fill", "{fill:?}");
        assert_eq!(fill.data["event"], "fill");
        assert_eq!(fill.data["id"], fill.id.as_str());
        assert_eq!(fill.data["order"]["id"], resting.body["id"]);
        assert_eq!(fill.data["order"]["status"], "filled");
        assert_eq!(fill.data["symbol"], "AAPL");
        assert_eq!(fill.data["qty"], "3");
        assert_eq!(fill.data["position_qty"], "3", "{}", fill.data);
        assert_eq!(fill.data["price"], "100.00", "{}", fill.data);
    })
    .await;
}

/// Killed mid-way and resumed with `Last-Event-ID`, a stream yields every event once: the
/// messages read before and after together are exactly the user's trade events since the
/// first stream opened, in order.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_resumed_stream_yields_every_event_once(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (user_id, token) = app.user("resume@example.com").await;
        app.quote("AAPL", "189.90", "190.10").await;
        let mut first = open(app, &token, None).await.expect("stream");
        let market = || Order::market("AAPL").buy().qty("1").day().json();
        let placed = app.create_order(&token, Uuid::new_v4(), &market()).await;
        assert_eq!(placed.status, StatusCode::CREATED, "{}", placed.text);
        let mut seen = vec![
            first.expect(Duration::from_secs(2)).await,
            first.expect(Duration::from_secs(2)).await,
        ];
        assert_eq!(
            seen.iter().map(|m| m.event.as_str()).collect::<Vec<_>>(),
            ["new", "fill"]
        );
        drop(first);

        // Meanwhile: a resting order, its cancel, another market order.
        let resting = app
            .create_order(
                &token,
                Uuid::new_v4(),
                &Order::limit("AAPL", "150.00").buy().qty("1").gtc().json(),
            )
            .await;
        let canceled = app.cancel_order(&token, resting.id()).await;
        assert_eq!(canceled.status, StatusCode::OK, "{}", canceled.text);
        let again = app.create_order(&token, Uuid::new_v4(), &market()).await;
        assert_eq!(again.status, StatusCode::CREATED, "{}", again.text);

        let last = seen.last().map(|m| m.id.clone()).expect("an id");
        let mut resumed = open(app, &token, Some(&last)).await.expect("resumed");
        loop {
            match resumed.next(Duration::from_millis(500)).await {
                Next::Message(message) => seen.push(message),
                Next::Quiet => break,
                Next::Ended => panic!("the stream ended"),
            }
        }
        assert_eq!(
            seen.iter().map(|m| m.event.as_str()).collect::<Vec<_>>(),
            ["new", "fill", "new", "canceled", "new", "fill"]
        );
        let ids: Vec<i64> = seen.iter().map(|m| m.id.parse().expect("id")).collect();
        let expected: Vec<i64> = sqlx::query_scalar(
            "select id from audit_log where user_id = $1
                and action = any($2) and id >= $3 order by id",
        )
        .bind(user_id)
        .bind(raptor_api::trading::stream::TRADE_ACTIONS)
        .bind(ids[0])
        .fetch_all(&app.pool)
        .await
        .expect("trade rows");
        assert_eq!(ids, expected, "every event once, in order");
        assert_eq!(seen[3].data["order"]["id"], resting.body["id"]);
        assert_eq!(seen[3].data["reason"], "requested");
        // The position each fill left, as of that fill (read after both).
        assert_eq!(seen[1].data["position_qty"], "1", "{}", seen[1].data);
        assert_eq!(seen[5].data["position_qty"], "2", "{}", seen[5].data);
    })
    .await;
}

/// A stream's first message is its position (an `id` without data): `0` before the user's first
/// event, else the newest event's id. Resuming from either misses nothing that came after, so a
/// connection that drops before its first event loses nothing.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_stream_announces_its_position_first(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("position@example.com").await;
        app.quote("AAPL", "189.90", "190.10").await;
        let mut before_any = open(app, &token, None).await.expect("stream");
        let start = before_any.position().await;
        assert_eq!(start, "0");
        drop(before_any);

        let market = Order::market("AAPL").buy().qty("1").day().json();
        let placed = app.create_order(&token, Uuid::new_v4(), &market).await;
        assert_eq!(placed.status, StatusCode::CREATED, "{}", placed.text);
        let mut resumed = open(app, &token, Some(&start)).await.expect("resumed");
        assert_eq!(resumed.position().await, "0");
        let new = resumed.expect(Duration::from_secs(2)).await;
        let fill = resumed.expect(Duration::from_secs(2)).await;
        assert_eq!((new.event.as_str(), fill.event.as_str()), ("new", "fill"));
        assert_eq!(fill.data["order"]["id"], placed.body["id"]);

        let mut later = open(app, &token, None).await.expect("stream");
        assert_eq!(later.position().await, fill.id);
    })
    .await;
}

/// A `Last-Event-ID` that names no event of the user still kept is `410 stream_history_gone`.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn an_unknown_last_event_id_is_gone(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("gone@example.com").await;
        for last in ["999999999", "yesterday", "-1"] {
            let refused = open(app, &token, Some(last)).await.err().expect("refused");
            assert_problem(&refused, StatusCode::GONE, ErrorCode::StreamHistoryGone);
        }
    })
    .await;
}

/// Past the per-user bound a stream is refused (`429 rate_limited`); once one closes another
/// opens. The drain of a shutdown ends every stream.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn streams_are_bounded_and_end_with_the_drain(pool: PgPool) {
    let options = Options {
        api: ApiConfig {
            trade_streams: StreamLimits {
                per_user: 2,
                per_process: 10,
            },
            ..ApiConfig::default()
        },
        ..Options::default()
    };
    TestApp::run(&pool, options, async |app| {
        let (_, token) = app.user("bounded@example.com").await;
        let one = open(app, &token, None).await.expect("first");
        let mut two = open(app, &token, None).await.expect("second");
        let third = open(app, &token, None).await.err().expect("refused");
        assert_problem(
            &third,
            StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::RateLimited,
        );
        drop(one);
        let mut three = open(app, &token, None).await.expect("after one closed");
        assert_eq!(app.state.trade_streams().open_streams(), 2);

        app.state.trade_streams().close();
        for events in [&mut two, &mut three] {
            assert!(matches!(
                events.next(Duration::from_secs(2)).await,
                Next::Ended
            ));
        }
    })
    .await;
}

/// Trade rows of `user_id` after `after`, committed (read on a connection of its own).
async fn trade_rows_after(pool: &PgPool, user_id: i32, after: i64) -> Vec<String> {
    sqlx::query_scalar(
        "select action from audit_log where user_id = $1 and id > $2 and action = any($3)
          order by id",
    )
    .bind(user_id)
    .bind(after)
    .bind(raptor_api::trading::stream::TRADE_ACTIONS)
    .fetch_all(pool)
    .await
    .expect("trade rows")
}

/// The stream's order rests on every writer of a trade row holding the account's row lock
/// (so one user's rows commit in id order). While a transaction holds it, a market order, a
/// refused one, a cancel and a quote that crosses a resting order commit no trade row; once it
/// is released, all of theirs do.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn every_writer_of_a_trade_row_waits_for_the_account_lock(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (user_id, token) = app.user("writers@example.com").await;
        app.quote("AAPL", "189.90", "190.10").await;
        let resting = |price: &str| Order::limit("AAPL", price).buy().qty("1").gtc().json();
        let to_cancel = app
            .create_order(&token, Uuid::new_v4(), &resting("150.00"))
            .await;
        let to_fill = app
            .create_order(&token, Uuid::new_v4(), &resting("180.00"))
            .await;
        assert_eq!(to_fill.body["status"], "new", "{}", to_fill.text);
        let before: i64 = sqlx::query_scalar("select max(id) from audit_log")
            .fetch_one(&app.pool)
            .await
            .expect("max id");

        let mut held = app.pool.begin().await.expect("begin");
        sqlx::query("select 1 from paper_accounts where user_id = $1 for update")
            .bind(user_id)
            .execute(&mut *held)
            .await
            .expect("lock the account");
        let market = Order::market("AAPL").buy().qty("1").day().json();
        // Beyond the account's cash: refused, and the refusal is a committed trade row.
        let too_big = Order::market("AAPL").buy().qty("100000").day().json();
        let writers = async {
            tokio::join!(
                app.create_order(&token, Uuid::new_v4(), &market),
                app.create_order(&token, Uuid::new_v4(), &too_big),
                app.cancel_order(&token, to_cancel.id()),
                app.quote("AAPL", "170.00", "171.00"),
            )
        };
        let holding = async {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            let during = trade_rows_after(&app.pool, user_id, before).await;
            held.rollback().await.expect("release");
            during
        };
        let ((placed, refused, canceled, _), during) = tokio::join!(writers, holding);
        assert!(
            during.is_empty(),
            "trade rows committed while the account was locked: {during:?}"
        );
        assert_eq!(placed.status, StatusCode::CREATED, "{}", placed.text);
        assert_eq!(canceled.status, StatusCode::OK, "{}", canceled.text);
        assert!(refused.status.is_client_error(), "{}", refused.text);
        let mut after = trade_rows_after(&app.pool, user_id, before).await;
        after.sort();
        assert_eq!(
            after,
            [
                "order.accepted",
                "order.canceled",
                "order.filled",
                "order.filled",
                "order.rejected"
            ],
            "the market order's two rows, the cancel's, the crossed order's fill, the refusal"
        );
    })
    .await;
}
