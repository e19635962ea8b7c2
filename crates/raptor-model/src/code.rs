//! The one table that ties the model to the code: every transition, the SQL statement (or
//! COMMIT) it stands for, and the functions of the service's crates (`crates/`) that issue it.
//! A test reads those files and fails when a named function is renamed or removed
//! ([`functions_in`] finds them).

/// A function in the service's crates: `file` (relative to `crates/`) and
/// `path`, `Type::method` for a function in an `impl` block (inherent or of a trait), or a free
/// function's bare name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodeRef {
    /// The file, relative to `crates/` (`raptor-idempotency/src/claim/round.rs`).
    pub file: &'static str,
    /// `Type::function` or `function`.
    pub path: &'static str,
}

/// `at!(file, path)`: a [`CodeRef`] (a struct literal, so that `&[…]` of them is `'static`).
macro_rules! at {
    ($file:expr, $path:expr) => {
        CodeRef {
            file: $file,
            path: $path,
        }
    };
}

/// Who makes a transition happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The protocol's code: a statement, a COMMIT or a rollback.
    Protocol,
    /// The adversary (clock, crash, client, network); the functions named are the code that
    /// reacts to it.
    Adversary,
    /// Only in a mutant: no code does it.
    Mutant,
}

/// Every transition of the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transition {
    /// A client sends the key (again).
    Send,
    /// The claim statement: insert-or-take-over, union-read of the existing row, the judge's
    /// verdict on it, and a replay's audit row.
    Claim,
    /// The claim waited on the key row's lock past `lock_timeout`: 409 on every tier.
    ClaimBlocked,
    /// The claim's snapshot read misses a row committed after the statement began: claim
    /// again.
    ClaimVanished,
    /// No connection to the store at all: 503 (Tier 1) or fail-open (Tier 2).
    ClaimUnreachable,
    /// The store pool is busy: 503 on every tier.
    ClaimPoolBusy,
    /// No answer within the store timeout: 503; the round's task goes on.
    ClaimTimeout,
    /// The round's connection failed after the statement went out: 503, release by token.
    ClaimConnectionLost,
    /// The judge's fenced release of a stale `in_flight` row.
    ReleaseStale,
    /// That release failed (store error or timeout): 503.
    ReleaseStaleFailed,
    /// The completion `UPDATE` in the business transaction (fenced by `attempt`).
    Complete,
    /// The handler's refusal (`Err` below 500): ROLLBACK.
    Refuse,
    /// The refusal stored by a statement of its own (fenced).
    CompleteAlone,
    /// That statement failed: release, 503.
    CompleteAloneFailed,
    /// The handler's retryable 503: ROLLBACK.
    Retryable503,
    /// The handler's other 5xx or panic: ROLLBACK.
    ServerError,
    /// COMMIT of the business transaction with the completed row.
    Commit,
    /// The COMMIT's reply is lost (it may have landed).
    CommitLost,
    /// Release after a retryable 503 or a lost COMMIT (awaited, then 503).
    ReleaseRetryable,
    /// Fail after another 5xx or a panic (awaited, then 500).
    Fail,
    /// Release by the dropped guard of a cancelled request (spawned).
    ReleaseCancelled,
    /// A settle that did not get through: the row stays `in_flight` until stale.
    SettleLost,
    /// Release of a row won by a round whose answer was never taken.
    ReleaseWon,
    /// Release of an uncertain claim by its token (connection lost mid-statement).
    ReleaseAttempt,
    /// A fail-open (untracked) execution commits.
    FailOpen,
    /// Cleanup deletes the expired row.
    Cleanup,
    /// The process crashes.
    Crash,
    /// The request future is dropped (client gone, request timeout).
    Cancel,
    /// The client times out; the server goes on.
    Detach,
    /// The clock: the stale threshold passes for the row's attempt.
    ClockStale,
    /// The clock: `expires_at` passes.
    ClockExpire,
    /// Postgres ends a dead process's session, which held the row's lock.
    SessionEnds,
    /// Mutant `SelectThenInsert`: the `SELECT` of the key row.
    MutantClaimSelect,
    /// Mutant `SelectThenInsert`: the unguarded upsert.
    MutantClaimInsert,
}

impl Transition {
    /// Every transition.
    pub const ALL: [Transition; 34] = [
        Transition::Send,
        Transition::Claim,
        Transition::ClaimBlocked,
        Transition::ClaimVanished,
        Transition::ClaimUnreachable,
        Transition::ClaimPoolBusy,
        Transition::ClaimTimeout,
        Transition::ClaimConnectionLost,
        Transition::ReleaseStale,
        Transition::ReleaseStaleFailed,
        Transition::Complete,
        Transition::Refuse,
        Transition::CompleteAlone,
        Transition::CompleteAloneFailed,
        Transition::Retryable503,
        Transition::ServerError,
        Transition::Commit,
        Transition::CommitLost,
        Transition::ReleaseRetryable,
        Transition::Fail,
        Transition::ReleaseCancelled,
        Transition::SettleLost,
        Transition::ReleaseWon,
        Transition::ReleaseAttempt,
        Transition::FailOpen,
        Transition::Cleanup,
        Transition::Crash,
        Transition::Cancel,
        Transition::Detach,
        Transition::ClockStale,
        Transition::ClockExpire,
        Transition::SessionEnds,
        Transition::MutantClaimSelect,
        Transition::MutantClaimInsert,
    ];

    /// The transition's name in traces and in `docs/idempotency.md`.
    pub fn name(self) -> &'static str {
        self.entry().0
    }

    /// Who makes it happen.
    pub fn kind(self) -> Kind {
        self.entry().1
    }

    /// The statement it stands for.
    pub fn sql(self) -> &'static str {
        self.entry().2
    }

    /// The functions that issue it (the first one issues the statement), or that react to it
    /// for an adversary's transition.
    pub fn code(self) -> &'static [CodeRef] {
        self.entry().3
    }

    /// The table: (name, kind, statement, functions).
    fn entry(self) -> (&'static str, Kind, &'static str, &'static [CodeRef]) {
        use Kind::{Adversary, Mutant, Protocol};
        const ROUND: &str = "raptor-idempotency/src/claim/round.rs";
        const JUDGE: &str = "raptor-idempotency/src/claim/judge.rs";
        const SERVICE: &str = "raptor-idempotency/src/service.rs";
        const CLAIM: &str = "raptor-idempotency/src/claim/mod.rs";
        const GUARD: &str = "raptor-idempotency/src/claim/guard.rs";
        const EXTRACT: &str = "raptor-idempotency/src/extract.rs";
        const CLEANUP: &str = "raptor-idempotency/src/cleanup.rs";
        const COMPLETION: &str = "raptor-idempotency/src/claim/completion.rs";
        const PROTOCOL: &str = "raptor-idempotency/src/protocol.rs";
        const ORDERS: &str = "raptor-api/src/trading/store/orders.rs";
        const REACH: &str = "raptor-db/src/reach.rs";
        const DB_ERROR: &str = "raptor-db/src/error.rs";
        match self {
            Transition::Send => (
                "send",
                Adversary,
                "the request reaches the extractor, which claims",
                &[at!(EXTRACT, "Idempotent::from_request")],
            ),
            Transition::Claim => (
                "claim",
                Protocol,
                "insert … on conflict do update … where expired or (released and same request_hash) \
                 returning, union the unexpired row; judged; a replay writes its audit row",
                &[
                    at!(PROTOCOL, "claim"),
                    at!(ROUND, "Idempotency::round"),
                    at!(ROUND, "Idempotency::claim"),
                    at!(JUDGE, "Idempotency::judge"),
                    at!(JUDGE, "Idempotency::audit_replay"),
                    at!(ROUND, "Idempotency::won"),
                ],
            ),
            Transition::ClaimBlocked => (
                "claim_blocked",
                Protocol,
                "the claim's lock wait ends (55P03/57014): the store answered, 409 on every tier",
                &[at!(ROUND, "Idempotency::claim"), at!(DB_ERROR, "classify")],
            ),
            Transition::ClaimVanished => (
                "claim_vanished",
                Protocol,
                "the union's read (the statement's snapshot) misses a row committed after the \
                 statement began: no row, claim again (three rounds at most)",
                &[at!(ROUND, "Idempotency::claim")],
            ),
            Transition::ClaimUnreachable => (
                "claim_unreachable",
                Protocol,
                "no connection to the store: 503 (Tier 1) or untracked (Tier 2)",
                &[
                    at!(ROUND, "Idempotency::no_connection"),
                    at!(REACH, "Reachability::probe"),
                    at!(SERVICE, "Idempotency::untracked"),
                ],
            ),
            Transition::ClaimPoolBusy => (
                "claim_pool_busy",
                Protocol,
                "PoolTimedOut with connections open: 503 on every tier",
                &[at!(ROUND, "Idempotency::claim")],
            ),
            Transition::ClaimTimeout => (
                "claim_timeout",
                Protocol,
                "no answer within the store timeout: 503; the round's task goes on",
                &[at!(ROUND, "Idempotency::claim")],
            ),
            Transition::ClaimConnectionLost => (
                "claim_connection_lost",
                Protocol,
                "the claim statement's connection fails after it went out: 503",
                &[at!(ROUND, "Idempotency::claim")],
            ),
            Transition::ReleaseStale => (
                "release_stale",
                Protocol,
                "update … set status = 'released' where id = $1 and attempt = $2 and status = 'in_flight'",
                &[at!(PROTOCOL, "settle"), at!(JUDGE, "Idempotency::judge")],
            ),
            Transition::ReleaseStaleFailed => (
                "release_stale_failed",
                Protocol,
                "the stale release errs or times out: 503",
                &[at!(JUDGE, "Idempotency::judge")],
            ),
            Transition::Complete => (
                "complete",
                Protocol,
                "update … set status = 'completed', response_* = … where id = $1 and attempt = $2 \
                 and status = 'in_flight' (in the business transaction; no row: rollback, 409)",
                &[
                    at!(PROTOCOL, "complete"),
                    at!(PROTOCOL, "push_completion_cte"),
                    at!(CLAIM, "Claim::finish"),
                    at!(ORDERS, "insert_order"),
                ],
            ),
            Transition::Refuse => (
                "rollback_refused",
                Protocol,
                "ROLLBACK of a refusal (the handler's Err below 500): nothing it wrote is kept",
                &[at!(CLAIM, "Claim::end"), at!(CLAIM, "rollback")],
            ),
            Transition::CompleteAlone => (
                "complete_alone",
                Protocol,
                "update … set status = 'completed', response_* = … where id = $1 and attempt = $2 \
                 and status = 'in_flight', on its own on the store pool (no row: 409)",
                &[
                    at!(PROTOCOL, "complete"),
                    at!(CLAIM, "complete_alone"),
                    at!(COMPLETION, "Completion::write"),
                ],
            ),
            Transition::CompleteAloneFailed => (
                "complete_alone_failed",
                Protocol,
                "that update errs or times out: release (fenced), 503: the refusal is never \
                 answered without being stored",
                &[at!(CLAIM, "complete_alone"), at!(GUARD, "KeyGuard::settle_error")],
            ),
            Transition::Retryable503 => (
                "rollback_retryable",
                Protocol,
                "ROLLBACK of a retryable 503 (database busy, deadlock, serialization, timeout, \
                 upstream outcome unknown)",
                &[at!(CLAIM, "Claim::finish"), at!(CLAIM, "rollback")],
            ),
            Transition::ServerError => (
                "rollback_failed",
                Protocol,
                "ROLLBACK of another 5xx or a panic",
                &[at!(CLAIM, "Claim::finish"), at!(CLAIM, "rollback")],
            ),
            Transition::Commit => (
                "commit",
                Protocol,
                "COMMIT: the business writes, their audit_log rows and the completed key row",
                &[at!(CLAIM, "Claim::finish")],
            ),
            Transition::CommitLost => (
                "commit_lost",
                Protocol,
                "COMMIT whose reply is lost (landed or not): settle as a 503",
                &[at!(CLAIM, "Claim::finish"), at!(DB_ERROR, "is_connection_lost")],
            ),
            Transition::ReleaseRetryable => (
                "release_retryable",
                Protocol,
                "update … set status = 'released' where id = $1 and attempt = $2 and status = 'in_flight'",
                &[at!(PROTOCOL, "settle"), at!(GUARD, "settle"), at!(GUARD, "KeyGuard::settle_error")],
            ),
            Transition::Fail => (
                "settle_failed",
                Protocol,
                "update … set status = 'failed' where id = $1 and attempt = $2 and status = 'in_flight'",
                &[
                    at!(PROTOCOL, "settle"), at!(GUARD, "settle"),
                    at!(GUARD, "KeyGuard::settle_error"),
                    at!(GUARD, "KeyGuard::fail"),
                ],
            ),
            Transition::ReleaseCancelled => (
                "release_cancelled",
                Protocol,
                "update … set status = 'released' where id = $1 and attempt = $2 and status = 'in_flight' \
                 (spawned by the dropped guard)",
                &[at!(PROTOCOL, "settle"), at!(GUARD, "settle"), at!(GUARD, "KeyGuard::drop")],
            ),
            Transition::SettleLost => (
                "settle_lost",
                Protocol,
                "the settle UPDATE errs (logged: the key stays in flight until stale); the answer goes out",
                &[at!(PROTOCOL, "settle"), at!(GUARD, "settle")],
            ),
            Transition::ReleaseWon => (
                "release_won",
                Protocol,
                "update … set status = 'released' where id = $1 and attempt = $2 and status = 'in_flight' \
                 (a win nobody took)",
                &[
                    at!(ROUND, "Idempotency::release_won"),
                    at!(ROUND, "UntakenWin::drop"),
                    at!(PROTOCOL, "settle"), at!(GUARD, "settle"),
                ],
            ),
            Transition::ReleaseAttempt => (
                "release_attempt",
                Protocol,
                "update … set status = 'released' where idem_key = $1 and … and attempt = $4 and \
                 status = 'in_flight'",
                &[
                    at!(PROTOCOL, "release_attempt"),
                    at!(ROUND, "Idempotency::release_attempt"),
                ],
            ),
            Transition::FailOpen => (
                "fail_open",
                Protocol,
                "the untracked transaction's COMMIT (no key row)",
                &[
                    at!(SERVICE, "Idempotency::untracked"),
                    at!(ROUND, "Idempotency::no_connection"),
                    at!(CLAIM, "Claim::finish"),
                ],
            ),
            Transition::Cleanup => (
                "cleanup",
                Protocol,
                "delete … where expires_at < now() … for update skip locked",
                &[
                    at!(PROTOCOL, "delete_expired_batch"),
                    at!(CLEANUP, "delete_expired"),
                ],
            ),
            Transition::Crash => (
                "crash",
                Adversary,
                "the process dies: its open transaction aborts",
                &[],
            ),
            Transition::Cancel => (
                "cancel",
                Adversary,
                "the request future is dropped (client gone, request timeout)",
                &[at!(ROUND, "UntakenWin::drop"), at!(GUARD, "KeyGuard::drop")],
            ),
            Transition::Detach => (
                "detach",
                Adversary,
                "the client times out while the server goes on",
                &[],
            ),
            Transition::ClockStale => (
                "clock_stale",
                Adversary,
                "now() - locked_at passes stale_after (read by the claim)",
                &[at!(ROUND, "Idempotency::round")],
            ),
            Transition::ClockExpire => (
                "clock_expire",
                Adversary,
                "now() passes expires_at (read by the claim and by cleanup)",
                &[at!(ROUND, "Idempotency::round"), at!(CLEANUP, "delete_expired")],
            ),
            Transition::SessionEnds => (
                "session_ends",
                Adversary,
                "Postgres ends a dead process's session: its open transaction aborts, the row's \
                 lock goes",
                &[],
            ),
            Transition::MutantClaimSelect => (
                "mutant_claim_select",
                Mutant,
                "select … from idempotency_keys where idem_key = $1 …",
                &[],
            ),
            Transition::MutantClaimInsert => (
                "mutant_claim_insert",
                Mutant,
                "insert … on conflict do update (no where)",
                &[],
            ),
        }
    }
}

/// The functions defined in a Rust source file: `Type::name` for a function in an `impl` block
/// (`impl Type`, `impl Trait for Type`, generics stripped), the bare `name` otherwise. Comments,
/// strings and character literals are skipped, so braces in SQL or format strings do not count.
pub fn functions_in(source: &str) -> Vec<String> {
    let code = strip(source);
    let mut found = Vec::new();
    // The enclosing blocks: `Some(type)` for an impl block.
    let mut blocks: Vec<Option<String>> = Vec::new();
    let mut header = String::new();
    for ch in code.chars() {
        match ch {
            '{' => {
                let impl_type = impl_type(&header);
                if let Some(name) = fn_name(&header) {
                    let owner = blocks.last().cloned().flatten();
                    found.push(match owner {
                        Some(owner) => format!("{owner}::{name}"),
                        None => name,
                    });
                }
                blocks.push(impl_type);
                header.clear();
            }
            '}' => {
                blocks.pop();
                header.clear();
            }
            ';' => header.clear(),
            _ => header.push(ch),
        }
    }
    found
}

/// The text of `source` with comments, string and character literals replaced by spaces.
fn strip(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
            continue;
        }
        let before_ident = i > 0 && ident(chars[i - 1]);
        // Raw strings: r"…", r#"…"#, br"…".
        if !before_ident && (c == 'r' || (c == 'b' && next == Some('r'))) {
            let mut j = if c == 'b' { i + 2 } else { i + 1 };
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) == Some(&'"') {
                j += 1;
                loop {
                    match chars.get(j) {
                        None => break,
                        Some('"') if (1..=hashes).all(|h| chars.get(j + h) == Some(&'#')) => {
                            j += 1 + hashes;
                            break;
                        }
                        Some(_) => j += 1,
                    }
                }
                out.push(' ');
                i = j;
                continue;
            }
        }
        if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push(' ');
            continue;
        }
        if c == '\'' {
            // A character literal ('x', '\n', '\u{7f}'), or a lifetime ('a, 'static).
            if next == Some('\\') {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
                out.push(' ');
                continue;
            }
            if chars.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push(' ');
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

fn words(text: &str) -> Vec<&str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect()
}

/// `fn name` in a block's header.
fn fn_name(header: &str) -> Option<String> {
    let words = words(header);
    let at = words.iter().position(|w| *w == "fn")?;
    words.get(at + 1).map(|name| (*name).to_owned())
}

/// The implementing type of an `impl` header: after `for` if there is one (outside generics),
/// else after `impl` and its generics; the last path segment, generics stripped.
fn impl_type(header: &str) -> Option<String> {
    let at = find_word(header, "impl")?;
    // `impl Trait` in a function's signature is no impl block.
    if find_word(&header[..at], "fn").is_some() {
        return None;
    }
    let rest = skip_generics(&header[at + "impl".len()..]);
    let target = match find_word_outside_generics(rest, "for") {
        Some(at) => &rest[at + "for".len()..],
        None => rest,
    };
    let path: String = target
        .trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
        .collect();
    path.rsplit("::")
        .next()
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
}

/// The byte offset of the first standalone occurrence of `word` in `text`.
fn find_word(text: &str, word: &str) -> Option<usize> {
    text.match_indices(word)
        .map(|(at, _)| at)
        .find(|&at| is_standalone(text, at, word.len()))
}

fn is_standalone(text: &str, at: usize, len: usize) -> bool {
    let bytes = text.as_bytes();
    let before = at == 0 || !is_ident(bytes[at - 1]);
    let after = bytes.get(at + len).is_none_or(|b| !is_ident(*b));
    before && after
}

/// `text` after a leading `<…>` (nested), if it starts with one.
fn skip_generics(text: &str) -> &str {
    let trimmed = text.trim_start();
    if !trimmed.starts_with('<') {
        return trimmed;
    }
    let mut depth = 0;
    for (at, c) in trimmed.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => {
                depth -= 1;
                if depth == 0 {
                    return &trimmed[at + 1..];
                }
            }
            _ => {}
        }
    }
    ""
}

/// The byte offset of the standalone `word` outside `<…>`, if any.
fn find_word_outside_generics(text: &str, word: &str) -> Option<usize> {
    let mut depth = 0i32;
    for (at, c) in text.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            _ if depth == 0
                && text[at..].starts_with(word)
                && is_standalone(text, at, word.len()) =>
            {
                return Some(at);
            }
            _ => {}
        }
    }
    None
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

#[cfg(test)]
mod tests {
    use super::functions_in;

    const SAMPLE: &str = r##"
        //! A doc comment with { a brace.
        use std::fmt;
        pub struct Idempotency { inner: u8 }
        impl Idempotency {
            /// fn not_this() {
            pub async fn claim(&self) -> Result<(), ()> {
                let sql = "select '{' from t where x = '}'";
                let raw = r#"update t set a = "{" where b = 1"#;
                let c = '{';
                let s = format!("{}ms", 5);
                match c { '}' => {}, _ => {} }
                Ok(())
            }
            fn round<'a>(&'a self, x: impl Fn() -> u8) -> &'a u8 { /* } */ &self.inner }
        }
        impl<S, T> FromRequest<S> for Idempotent<T>
        where
            S: Send,
        {
            async fn from_request(req: u8) -> Self { todo!() }
        }
        impl Drop for crate::claim::KeyGuard {
            fn drop(&mut self) {}
        }
        pub(crate) async fn settle(idem: &Idempotency) { let _ = idem; }
        trait Quiet { fn declared(&self); }
    "##;

    #[test]
    fn finds_methods_trait_methods_and_free_functions() {
        let found = functions_in(SAMPLE);
        assert_eq!(
            found,
            [
                "Idempotency::claim",
                "Idempotency::round",
                "Idempotent::from_request",
                "KeyGuard::drop",
                "settle"
            ]
        );
    }

    #[test]
    fn a_renamed_function_is_not_found() {
        let renamed = SAMPLE.replace("fn round", "fn claim_round");
        let found = functions_in(&renamed);
        assert!(!found.iter().any(|f| f == "Idempotency::round"));
        assert!(found.iter().any(|f| f == "Idempotency::claim_round"));
        // A method moved out of its impl block is a free function, not `Type::name`.
        let moved = SAMPLE.replace("impl Drop for crate::claim::KeyGuard {", "mod guard {");
        assert!(!functions_in(&moved).iter().any(|f| f == "KeyGuard::drop"));
    }
}
