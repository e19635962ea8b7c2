//! Every keyed order the chaos driver sends is recorded (the user's token and the key, a hash of
//! the body, when it was sent and answered, the status, the order id and
//! `Idempotent-Replayed`), and each scenario's history is checked per key for linearizability
//! against a write-once register (stateright's `LinearizabilityTester` and `WORegister`): the
//! key's first execution writes its answer, every later answer must read that same answer.
//!
//! - A fresh answer (`Idempotent-Replayed: false`, a 2xx or a stored 4xx) is a write of its
//!   answer (the order id, or the status and code of a refusal) that succeeded; a 500 is a
//!   write of "failed".
//! - A replay (`Idempotent-Replayed: true`) is a read that returned its answer;
//!   `409 idempotency_previous_failed` a read of "failed".
//! - Anything else (no answer, 409 in flight, 422 another body, 429, 503) is indeterminate: it
//!   may or may not have executed. When a key's reads show an answer no determinate write
//!   produced, its indeterminate requests are in-flight writes of that answer (one of them may
//!   have executed it, none need have).
//!
//! The key is scoped by its user, as the service scopes it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use stateright::semantics::write_once_register::{WORegister, WORegisterOp, WORegisterRet};
use stateright::semantics::{ConsistencyTester, LinearizabilityTester};

/// One keyed request and its answer.
#[derive(Clone, Debug)]
pub(crate) struct Record {
    /// The user (a prefix of the token's hash) and the key.
    pub(crate) scope: String,
    /// The token itself, for the final reads (kept in memory only).
    pub(crate) token: String,
    pub(crate) key: String,
    pub(crate) body: String,
    pub(crate) invoked: Instant,
    pub(crate) returned: Instant,
    pub(crate) status: u16,
    pub(crate) code: Option<String>,
    pub(crate) order_id: Option<String>,
    pub(crate) replayed: Option<String>,
}

/// The requests recorded since the last [`History::take`]; shared by the clones of the
/// driver's HTTP client.
#[derive(Clone, Default)]
pub(crate) struct History(Arc<Mutex<Vec<Record>>>);

impl History {
    pub(crate) fn record(&self, record: Record) {
        if let Ok(mut records) = self.0.lock() {
            records.push(record);
        }
    }

    /// A copy of the history so far.
    pub(crate) fn snapshot(&self) -> Vec<Record> {
        self.0.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// The history so far, leaving an empty one.
    pub(crate) fn take(&self) -> Vec<Record> {
        self.0
            .lock()
            .map(|mut records| std::mem::take(&mut *records))
            .unwrap_or_default()
    }
}

/// Sends one more request for up to `n` keys that got a determinate answer (a fresh execution
/// or a replay), spread over `bases`, after the scenario: each is a read of what the key stored,
/// recorded with the rest, so the check also holds every acknowledged answer against the stored
/// one.
pub(crate) async fn final_reads(http: &crate::env::Http, bases: &[String], n: usize) -> usize {
    let records = http.history.snapshot();
    let mut keys: BTreeMap<(String, String), String> = BTreeMap::new();
    for r in &records {
        if !matches!(seen(r), Seen::Unknown) && keys.len() < n {
            keys.entry((r.scope.clone(), r.key.clone()))
                .or_insert_with(|| r.token.clone());
        }
    }
    if bases.is_empty() {
        return 0;
    }
    let mut set = tokio::task::JoinSet::new();
    let mut sent = 0;
    for (i, ((_, key), token)) in keys.into_iter().enumerate() {
        let (http, base) = (http.clone(), bases[i % bases.len()].clone());
        set.spawn(async move { http.order(&base, &token, Some(&key)).await });
        while set.len() >= 16 && set.join_next().await.is_some() {
            sent += 1;
        }
    }
    while set.join_next().await.is_some() {
        sent += 1;
    }
    sent
}

/// What a record says about the key's register.
enum Seen {
    Wrote(String),
    Read(String),
    Unknown,
}

fn seen(r: &Record) -> Seen {
    let answer = || {
        r.order_id
            .clone()
            .unwrap_or_else(|| format!("{} {}", r.status, r.code.as_deref().unwrap_or("")))
    };
    match (r.status, r.code.as_deref(), r.replayed.as_deref()) {
        (409, Some("idempotency_previous_failed"), _) => Seen::Read("failed".into()),
        (500, _, _) => Seen::Wrote("failed".into()),
        (0 | 429 | 503, _, _) | (409, Some("idempotency_in_flight"), _) => Seen::Unknown,
        (422, Some("idempotency_key_body_mismatch"), _) => Seen::Unknown,
        (s, _, Some("false")) if s < 500 => Seen::Wrote(answer()),
        (s, _, Some("true")) if s < 500 => Seen::Read(answer()),
        _ => Seen::Unknown,
    }
}

/// What a check found.
pub(crate) struct Verdict {
    pub(crate) keys: usize,
    pub(crate) requests: usize,
    pub(crate) indeterminate: usize,
    /// One line per key whose history no order of its requests explains.
    pub(crate) violations: Vec<String>,
}

/// Checks `records` key by key.
pub(crate) fn check(records: &[Record]) -> Verdict {
    let mut by_key: BTreeMap<(&str, &str), Vec<&Record>> = BTreeMap::new();
    for r in records {
        by_key.entry((&r.scope, &r.key)).or_default().push(r);
    }
    let mut verdict = Verdict {
        keys: by_key.len(),
        requests: records.len(),
        indeterminate: records
            .iter()
            .filter(|r| matches!(seen(r), Seen::Unknown))
            .count(),
        violations: Vec::new(),
    };
    for ((_, key), requests) in by_key {
        if let Err(why) = linearizable(&requests) {
            verdict.violations.push(format!("key {key}: {why}"));
        }
    }
    verdict
}

/// Whether some order of `requests`, within their real-time order, is a sequential history of
/// a write-once register.
fn linearizable(requests: &[&Record]) -> Result<(), String> {
    let written: BTreeSet<String> = requests
        .iter()
        .filter_map(|r| match seen(r) {
            Seen::Wrote(v) => Some(v),
            _ => None,
        })
        .collect();
    let unexplained: BTreeSet<String> = requests
        .iter()
        .filter_map(|r| match seen(r) {
            Seen::Read(v) if !written.contains(&v) => Some(v),
            _ => None,
        })
        .collect();
    let unknown_writes = unexplained.iter().next().cloned();
    // Events in real time: (when, is a return, request).
    let mut events: Vec<(Instant, bool, usize)> = Vec::new();
    for (i, r) in requests.iter().enumerate() {
        match seen(r) {
            Seen::Unknown if unknown_writes.is_none() => continue,
            Seen::Unknown => events.push((r.invoked, false, i)),
            _ => {
                events.push((r.invoked, false, i));
                events.push((r.returned, true, i));
            }
        }
    }
    events.sort_by_key(|&(at, is_return, _)| (at, !is_return));
    let mut tester = LinearizabilityTester::new(WORegister::<String>(None));
    for (_, is_return, i) in events {
        let r = requests[i];
        let result = match (seen(r), is_return) {
            (Seen::Wrote(v), false) => tester.on_invoke(i, WORegisterOp::Write(v)).map(|_| ()),
            (Seen::Wrote(_), true) => tester.on_return(i, WORegisterRet::WriteOk).map(|_| ()),
            (Seen::Read(_), false) => tester.on_invoke(i, WORegisterOp::Read).map(|_| ()),
            (Seen::Read(v), true) => tester
                .on_return(i, WORegisterRet::ReadOk(Some(v)))
                .map(|_| ()),
            (Seen::Unknown, _) => {
                let v = unknown_writes.clone().unwrap_or_default();
                tester.on_invoke(i, WORegisterOp::Write(v)).map(|_| ())
            }
        };
        result.map_err(|e| format!("invalid history: {e}"))?;
    }
    if unexplained.len() > 1 || !tester.is_consistent() {
        let mut sorted: Vec<&&Record> = requests.iter().collect();
        sorted.sort_by_key(|r| r.invoked);
        let t0 = sorted.first().map(|r| r.invoked);
        let answers: Vec<String> = sorted
            .iter()
            .map(|r| {
                let at = t0.map_or(0, |t| r.invoked.duration_since(t).as_millis());
                let took = r.returned.duration_since(r.invoked).as_millis();
                format!(
                    "+{at}ms body {} {} {}{} in {took}ms",
                    r.body,
                    r.status,
                    r.order_id.as_deref().or(r.code.as_deref()).unwrap_or(""),
                    match r.replayed.as_deref() {
                        Some("true") => " (replay)",
                        Some("false") => " (fresh)",
                        _ => "",
                    }
                )
            })
            .collect();
        return Err(format!(
            "no order of its {} requests is a write-once register's history: {}",
            requests.len(),
            answers.join("; ")
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn record(at: u64, took: u64, status: u16, id: &str, replayed: &str) -> Record {
        let t0 = *START;
        Record {
            scope: "u".into(),
            token: "t".into(),
            key: "k".into(),
            body: "b".into(),
            invoked: t0 + Duration::from_millis(at),
            returned: t0 + Duration::from_millis(at + took),
            status,
            code: (status == 503).then(|| "idempotency_store_unavailable".into()),
            order_id: (status == 201).then(|| id.into()),
            replayed: (status == 201).then(|| replayed.into()),
        }
    }

    static START: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);

    #[test]
    fn one_execution_then_replays_is_linearizable() {
        let h = [
            record(0, 10, 201, "A", "false"),
            record(5, 10, 201, "A", "true"),
            record(20, 5, 201, "A", "true"),
        ];
        assert!(check(&h).violations.is_empty());
    }

    #[test]
    fn two_executions_are_not() {
        let h = [
            record(0, 10, 201, "A", "false"),
            record(20, 5, 201, "B", "false"),
        ];
        assert_eq!(check(&h).violations.len(), 1);
    }

    #[test]
    fn a_replay_before_its_execution_began_is_not() {
        let h = [
            record(0, 5, 201, "A", "true"),
            record(10, 5, 201, "A", "false"),
        ];
        assert_eq!(check(&h).violations.len(), 1);
    }

    #[test]
    fn a_timeout_that_executed_explains_a_later_replay() {
        let h = [
            record(0, 30, 0, "", ""),
            record(40, 5, 503, "", ""),
            record(50, 5, 201, "A", "true"),
        ];
        assert!(check(&h).violations.is_empty());
        // But not a replay of an answer that was already read as another.
        let h = [
            record(0, 30, 0, "", ""),
            record(50, 5, 201, "A", "true"),
            record(60, 5, 201, "B", "true"),
        ];
        assert_eq!(check(&h).violations.len(), 1);
    }
}
