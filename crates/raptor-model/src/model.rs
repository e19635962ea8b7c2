//! The model: the database's key row, the committed business effects and audit rows as shared
//! state; clients and server attempts as processes; clocks, crashes, cancellations and the
//! store's faults as the adversary. Every step is one SQL statement (or one COMMIT) of the
//! protocol, named in [`crate::code::Transition`], which also says which function of
//! `crates/raptor-idempotency` issues it.

use stateright::{Model, Property};

use crate::code::Transition;

/// The route's tier: what a claim that cannot reach the store does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tier {
    /// Tier 1: the store unreachable is `503 idempotency_store_unavailable`.
    FailClosed,
    /// Tier 2: the store unreachable (no connection at all) runs the request without dedup.
    FailOpen,
}

/// A deliberate bug, to show that the checker finds it (the model is not vacuous).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mutant {
    /// The completion's `WHERE` loses `attempt = $2`: `where id = $1 and status = 'in_flight'`.
    NoFence,
    /// The claim is a `SELECT` of the key row, then (when it looked free) an unconditional
    /// `INSERT … ON CONFLICT DO UPDATE` without the `WHERE expired or released` guard.
    SelectThenInsert,
    /// A claim that finds the store pool busy (connections open, none free in time) is treated
    /// as "store unreachable": a Tier 2 route fails open.
    FailOpenOnBusyPool,
    /// The judge never releases a stale `in_flight` row (no stale takeover): a key whose
    /// attempt crashed is `409 idempotency_in_flight` forever. A liveness bug, for the
    /// liveness check.
    NoStaleTakeover,
}

/// The bounds of one check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Clients, all sending the same key (one key: different keys share nothing but pools).
    pub clients: u8,
    /// Distinct request bodies: every client starts with body 0; sending another one (a retry
    /// with a different body) is one of the adversary's choices.
    pub bodies: u8,
    /// Lifetimes of the key (`lifetimes - 1` expiries may happen).
    pub lifetimes: u8,
    /// The adversary's budget, in total: crashes, cancellations, client timeouts, store faults,
    /// lock-wait timeouts, retryable 503s, lost commits, an attempt going stale while it is
    /// alive, a client changing its body.
    pub faults: u8,
}

impl Bounds {
    /// The bounds `cargo test` checks: two clients with a budget of three, three clients with a
    /// budget of two.
    pub const TESTS: [Bounds; 2] = [
        Bounds {
            clients: 2,
            bodies: 2,
            lifetimes: 2,
            faults: 3,
        },
        Bounds {
            clients: 3,
            bodies: 2,
            lifetimes: 2,
            faults: 2,
        },
    ];
    /// The bound the mutant tests use (each mutant is caught well within it).
    pub const MUTANTS: Bounds = Bounds {
        clients: 2,
        bodies: 2,
        lifetimes: 2,
        faults: 2,
    };
    /// The larger bound of `make model`.
    pub const LARGE: Bounds = Bounds {
        clients: 3,
        bodies: 2,
        lifetimes: 2,
        faults: 3,
    };
}

/// The model of the claim protocol for one key.
#[derive(Clone, Debug)]
pub struct ClaimProtocol {
    /// The bounds.
    pub bounds: Bounds,
    /// The tiers explored (one initial state each).
    pub tiers: Vec<Tier>,
    /// A deliberate bug, or `None` for the protocol as the contract states it.
    pub mutant: Option<Mutant>,
    /// Symmetry reduction: clients are interchangeable, so each state is replaced by the one
    /// with its clients in a canonical order (see [`State::canonical`]). Off by default, so
    /// that a trace keeps its clients' numbers.
    pub symmetry: bool,
}

impl ClaimProtocol {
    /// The protocol as specified, on both tiers.
    pub fn new(bounds: Bounds) -> Self {
        Self {
            bounds,
            tiers: vec![Tier::FailClosed, Tier::FailOpen],
            mutant: None,
            symmetry: false,
        }
    }

    /// The same model with symmetry reduction.
    pub fn with_symmetry(mut self) -> Self {
        self.symmetry = true;
        self
    }

    /// The same bounds with a deliberate bug.
    pub fn with_mutant(mut self, mutant: Mutant) -> Self {
        self.mutant = Some(mutant);
        self
    }

    fn is(&self, mutant: Mutant) -> bool {
        self.mutant == Some(mutant)
    }
}

/// `idempotency_keys.status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Status {
    /// Claimed; an attempt is (or was) executing.
    InFlight,
    /// The response is stored (committed with the business writes).
    Completed,
    /// A 5xx other than a retryable 503, or a panic: `409 idempotency_previous_failed`.
    Failed,
    /// Rolled back (cancelled, retryable 503, fenced off as stale): free for the next claim of
    /// the same request, with the same lineage.
    Released,
}

/// What the handler answered and the completion stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Code {
    /// A 2xx.
    Success,
    /// A 4xx (a business rejection): stored and replayed like a success.
    Rejection,
    /// A 4xx whose writes were rolled back (the handler's `Err` below 500): stored on the key
    /// by a statement of its own, after the rollback (`complete_alone`); no effect.
    Refusal,
}

/// A response, identified by the execution that produced it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Resp {
    /// The execution (its attempt token).
    pub token: u8,
    /// Its status class.
    pub code: Code,
    /// The body of the request it answered.
    pub body: u8,
}

/// The key row (`idempotency_keys`), as last committed, plus its row lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Row {
    /// `id`: a new row (after cleanup deleted the old one) gets a new id.
    pub id: u8,
    /// `status`.
    pub status: Status,
    /// `attempt`: the fencing token of the claim that holds or held the row.
    pub attempt: u8,
    /// `lineage`: the key's lifetime (kept across released attempts, new after expiry).
    pub lineage: u8,
    /// `request_hash`: which body.
    pub hash: u8,
    /// `now() - locked_at > stale_after`: the adversary's clock flips it at any moment.
    pub stale: bool,
    /// `expires_at <= now()`: the adversary's clock flips it (bounded by the lifetimes).
    pub expired: bool,
    /// `response_*`: set by the completion.
    pub response: Option<Resp>,
    /// The attempt whose uncommitted completion `UPDATE` holds the row's lock.
    pub locked_by: Option<u8>,
}

/// Why a claim round did not reach the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StoreFault {
    /// No connection to the store can be made at all.
    Unreachable,
    /// The store pool has connections, none free in time.
    PoolBusy,
}

/// A committed business transaction (its writes and its `audit_log` rows commit together).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Effect {
    /// A claimed execution's commit.
    Tracked {
        /// The execution (attempt token).
        token: u8,
        /// The lineage its claim returned (`Claim::lineage`, the seed of downstream ids).
        lineage: u8,
        /// The key row as the same commit left it: `(lineage, attempt, response)`.
        row: (u8, u8, Option<Resp>),
    },
    /// A fail-open execution: no key row.
    Untracked {
        /// The execution.
        token: u8,
        /// What the claim round met.
        cause: StoreFault,
        /// The route's tier.
        tier: Tier,
    },
}

/// A client's final answer (it stops retrying).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Final {
    /// A stored response: fresh (`replayed = false`) or a replay.
    Stored {
        /// The lineage of the row that answered.
        lineage: u8,
        /// The response.
        resp: Resp,
        /// `Idempotent-Replayed: true`.
        replayed: bool,
    },
    /// A fail-open execution's answer (nothing stored).
    Untracked {
        /// The execution.
        token: u8,
    },
    /// A 5xx other than 503 (the key is failed).
    ServerError,
    /// `409 idempotency_previous_failed`.
    PreviousFailed,
    /// `422 idempotency_key_body_mismatch`.
    Mismatch,
}

/// A client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Client {
    /// Will send (first time, or a retry after a 409 in flight, a 503 or a timeout).
    Idle,
    /// One request outstanding.
    Waiting,
    /// Got a final answer.
    Done(Final),
}

/// How a settle ends the key of an attempt whose transaction rolled back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Settle {
    /// A retryable 503 (or a lost COMMIT): release, answer 503.
    Retryable,
    /// Another 5xx or a panic: fail, answer 500.
    Failed,
    /// The request future was dropped: release (the guard's spawned task), no answer.
    Cancelled,
}

/// Where a server attempt is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Pc {
    /// The claim round is to run (`rounds` already done). `orphan`: the request is gone and
    /// only the round's task is left, which releases a row it wins.
    Round {
        /// Rounds done (the loop gives up after 3).
        rounds: u8,
        /// The request is gone.
        orphan: bool,
    },
    /// Mutant `SelectThenInsert` only: the `SELECT` found the key free.
    Selected {
        /// Rounds done.
        rounds: u8,
        /// The request is gone.
        orphan: bool,
    },
    /// The round read an `in_flight` row older than the stale threshold: release it (fenced).
    ReleaseStale {
        /// The row read.
        row_id: u8,
        /// Its attempt token as read.
        attempt: u8,
        /// Rounds done.
        rounds: u8,
    },
    /// The winner's business transaction is open; the handler runs.
    Executing {
        /// Its fencing token.
        token: u8,
        /// Its lineage.
        lineage: u8,
        /// Its row.
        row_id: u8,
    },
    /// The completion `UPDATE` matched: the row is locked, the COMMIT is next.
    Committing {
        /// Its token.
        token: u8,
        /// Its lineage.
        lineage: u8,
        /// What the handler answered.
        code: Code,
    },
    /// The handler refused (`Err` below 500): rolled back; the refusal is to be stored on the
    /// key by a statement of its own.
    CompletingAlone {
        /// Its token.
        token: u8,
        /// Its lineage.
        lineage: u8,
        /// Its row.
        row_id: u8,
    },
    /// Rolled back; the key is to be settled (released or failed), fenced by the token.
    Settling {
        /// Its token.
        token: u8,
        /// Its row.
        row_id: u8,
        /// Release or fail, and what to answer.
        how: Settle,
    },
    /// An orphaned round won: release the row (`release_won`).
    ReleaseWon {
        /// Its token.
        token: u8,
        /// Its row.
        row_id: u8,
    },
    /// The round's connection failed after the statement went out: release by token.
    ReleaseAttempt {
        /// Its token.
        token: u8,
    },
    /// The claim statement of a round whose connection failed before it answered, released by
    /// its token already (`release_attempt` matched nothing): it may still land on the server
    /// later, and nobody will complete or release what it wins (the row goes stale).
    Landing,
    /// Fail-open: the request runs untracked.
    Untracked {
        /// Its execution id.
        token: u8,
        /// What the claim round met.
        cause: StoreFault,
    },
}

/// A server attempt: one request being handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Attempt {
    /// Its program counter.
    pub pc: Pc,
    /// Its client.
    pub client: u8,
    /// Whether its client still waits for its answer.
    pub waiting: bool,
    /// The request's body (`request_hash`).
    pub body: u8,
}

impl Attempt {
    /// The fencing token this attempt holds a key row with, if any.
    fn holds(&self) -> Option<u8> {
        match self.pc {
            Pc::Executing { token, .. }
            | Pc::Committing { token, .. }
            | Pc::CompletingAlone { token, .. }
            | Pc::Settling { token, .. }
            | Pc::ReleaseWon { token, .. }
            | Pc::ReleaseAttempt { token } => Some(token),
            _ => None,
        }
    }
}

/// Events that no state component shows, kept for the `sometimes` properties.
pub mod event {
    /// A completion matched no row: the attempt was fenced off.
    pub const FENCED: u8 = 1;
    /// A stale `in_flight` row was released by another request.
    pub const STALE_RELEASED: u8 = 2;
    /// A claim took over a `released` row.
    pub const RELEASED_TAKEN_OVER: u8 = 4;
    /// A COMMIT whose reply was lost had landed.
    pub const LOST_COMMIT_LANDED: u8 = 8;
}

/// The whole system.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// The route's tier.
    pub tier: Tier,
    /// The key row, if one exists.
    pub row: Option<Row>,
    /// Committed business transactions, in commit order.
    pub effects: Vec<Effect>,
    /// `idempotency_replay` audit rows: which response each replay answered (as a set).
    pub replay_audits: Vec<Resp>,
    /// The clients.
    pub clients: Vec<Client>,
    /// Each client's body (`request_hash`): what it sends next.
    pub bodies: Vec<u8>,
    /// The server attempts in progress (sorted: attempts are told apart by what they are).
    pub attempts: Vec<Attempt>,
    /// The next fencing token (tokens are handed out when a claim wins: only a winner's token
    /// is ever written, and tokens stay unique).
    pub next_token: u8,
    /// The next row id.
    pub next_row_id: u8,
    /// Lifetimes begun (the next lineage).
    pub lifetimes: u8,
    /// Expiries the clock may still cause.
    pub expiries_left: u8,
    /// Faults the adversary may still inject.
    pub faults_left: u8,
    /// [`event`] bits.
    pub events: u8,
}

/// What an attempt does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// The claim statement (or, mutant `SelectThenInsert`, its `SELECT`).
    Claim,
    /// Mutant `SelectThenInsert`: the unguarded upsert after the `SELECT`.
    ClaimInsert,
    /// The claim waited on the row's lock past `lock_timeout`.
    ClaimLockTimeout,
    /// The claim's read (the statement's snapshot, taken when it began) misses the row another
    /// claim committed meanwhile: no row comes back, and the round claims again.
    ClaimVanished,
    /// No connection to the store can be made.
    ClaimUnreachable,
    /// The store pool is busy.
    ClaimPoolBusy,
    /// No answer within the store timeout: the round's task goes on alone.
    ClaimTimeout,
    /// The connection failed after the statement went out; `executed`: it had run.
    ClaimConnLost {
        /// Whether the statement had run.
        executed: bool,
    },
    /// The judge's fenced release of a stale row.
    ReleaseStale,
    /// The release of a stale row did not get through (store error or timeout).
    ReleaseStaleFailed,
    /// The handler answered `code`: the completion `UPDATE`.
    Complete(Code),
    /// The handler refused (`Err` below 500): roll back, then store the refusal alone.
    Refuse,
    /// The refusal's own completion statement (fenced, on the store pool).
    CompleteAlone,
    /// That statement failed: release the key and answer 503 (the refusal was never stored).
    CompleteAloneFailed,
    /// The handler answered a retryable 503: roll back.
    Retryable503,
    /// The handler answered another 5xx (or panicked): roll back.
    ServerError,
    /// COMMIT.
    Commit,
    /// The COMMIT's reply was lost; `landed`: it had committed.
    CommitLost {
        /// Whether the commit landed.
        landed: bool,
    },
    /// The settle `UPDATE` (release or fail, fenced), as the attempt's [`Settle`] says.
    Settle(Settle),
    /// The settle `UPDATE` did not get through (store error): answered anyway, the row stays
    /// `in_flight` until stale.
    SettleLost,
    /// The orphaned round's release of its win.
    ReleaseWon,
    /// The release of an uncertain claim by its token.
    ReleaseAttempt,
    /// The fail-open execution commits.
    CommitUntracked,
    /// The process dies: its transaction aborts, nothing else runs.
    Crash,
    /// The client times out and the server drops the request future.
    Cancel,
    /// The request future is dropped while its COMMIT is on the wire, and the COMMIT lands.
    CancelCommitLanded,
    /// The client times out; the server goes on (its answer is lost).
    Detach,
}

/// An action of the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// A client sends (or re-sends) its key with a body.
    Send {
        /// The client.
        client: u8,
        /// The body.
        body: u8,
    },
    /// An attempt's next step (`attempt` indexes the sorted attempts).
    Step {
        /// The attempt.
        attempt: u8,
        /// The step.
        step: Step,
    },
    /// The clock: the key row's in-flight attempt passes the stale threshold.
    Stale,
    /// The clock: the key row's `expires_at` passes.
    Expire,
    /// Cleanup deletes the expired row.
    Cleanup,
    /// Postgres ends the session of a process that died holding the row's lock (its
    /// connection closes, or keepalives find it gone): the transaction aborts, the lock goes.
    SessionEnds,
}

impl Action {
    /// The transition this action stands for (see [`Transition`] for the code).
    pub fn transition(&self, mutant: Option<Mutant>) -> Transition {
        match self {
            Action::Send { .. } => Transition::Send,
            Action::Stale => Transition::ClockStale,
            Action::Expire => Transition::ClockExpire,
            Action::Cleanup => Transition::Cleanup,
            Action::SessionEnds => Transition::SessionEnds,
            Action::Step { step, .. } => match step {
                Step::Claim if mutant == Some(Mutant::SelectThenInsert) => {
                    Transition::MutantClaimSelect
                }
                Step::Claim => Transition::Claim,
                Step::ClaimInsert => Transition::MutantClaimInsert,
                Step::ClaimLockTimeout => Transition::ClaimBlocked,
                Step::ClaimVanished => Transition::ClaimVanished,
                Step::ClaimUnreachable => Transition::ClaimUnreachable,
                Step::ClaimPoolBusy => Transition::ClaimPoolBusy,
                Step::ClaimTimeout => Transition::ClaimTimeout,
                Step::ClaimConnLost { .. } => Transition::ClaimConnectionLost,
                Step::ReleaseStale => Transition::ReleaseStale,
                Step::ReleaseStaleFailed => Transition::ReleaseStaleFailed,
                Step::Complete(_) => Transition::Complete,
                Step::Refuse => Transition::Refuse,
                Step::CompleteAlone => Transition::CompleteAlone,
                Step::CompleteAloneFailed => Transition::CompleteAloneFailed,
                Step::Retryable503 => Transition::Retryable503,
                Step::ServerError => Transition::ServerError,
                Step::Commit => Transition::Commit,
                Step::CommitLost { .. } => Transition::CommitLost,
                Step::Settle(Settle::Retryable) => Transition::ReleaseRetryable,
                Step::Settle(Settle::Failed) => Transition::Fail,
                Step::Settle(Settle::Cancelled) => Transition::ReleaseCancelled,
                Step::SettleLost => Transition::SettleLost,
                Step::ReleaseWon => Transition::ReleaseWon,
                Step::ReleaseAttempt => Transition::ReleaseAttempt,
                Step::CommitUntracked => Transition::FailOpen,
                Step::Crash => Transition::Crash,
                Step::Cancel | Step::CancelCommitLanded => Transition::Cancel,
                Step::Detach => Transition::Detach,
            },
        }
    }
}

/// What a request is answered (what the client does next follows from it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reply {
    Final(Final),
    /// 409 `idempotency_in_flight` (any `retry_after_ms`) or 503: retry with the same key.
    Retry,
}

/// What a claim statement returned.
enum Round {
    Won { token: u8, lineage: u8, row_id: u8 },
    Existing(Row),
}

impl State {
    /// The state with its clients renumbered into a canonical order: by what each client is,
    /// its body and its attempts. Clients with equal keys are interchangeable, so any order
    /// among them gives the same state. Every property treats clients alike, so checking the
    /// canonical states checks them all.
    pub fn canonical(&self) -> State {
        let key = |c: usize| {
            let mut attempts: Vec<(Pc, bool, u8)> = self
                .attempts
                .iter()
                .filter(|a| usize::from(a.client) == c)
                .map(|a| (a.pc, a.waiting, a.body))
                .collect();
            attempts.sort_unstable();
            (self.clients[c], self.bodies[c], attempts)
        };
        let mut order: Vec<usize> = (0..self.clients.len()).collect();
        order.sort_by_cached_key(|&c| key(c));
        // `order[new] = old`; `renumber[old] = new`.
        let mut renumber = vec![0u8; order.len()];
        for (new, &old) in order.iter().enumerate() {
            renumber[old] = u8::try_from(new).unwrap_or(u8::MAX);
        }
        let mut s = self.clone();
        s.clients = order.iter().map(|&old| self.clients[old]).collect();
        s.bodies = order.iter().map(|&old| self.bodies[old]).collect();
        for a in &mut s.attempts {
            a.client = renumber[usize::from(a.client)];
        }
        s.attempts.sort_unstable();
        s
    }

    fn lock_free(&self) -> bool {
        self.row.is_none_or(|row| row.locked_by.is_none())
    }

    fn holder_alive(&self, token: u8) -> bool {
        self.attempts.iter().any(|a| a.holds() == Some(token))
    }

    fn spend_fault(&mut self) {
        self.faults_left -= 1;
    }

    fn new_token(&mut self) -> u8 {
        let token = self.next_token;
        self.next_token += 1;
        token
    }

    /// Delivers `reply` to the attempt's client if it still waits, and stops it waiting.
    fn answer(&mut self, attempt: usize, reply: Reply) {
        let a = &mut self.attempts[attempt];
        if a.waiting {
            a.waiting = false;
            self.clients[usize::from(a.client)] = match reply {
                Reply::Final(done) => Client::Done(done),
                Reply::Retry => Client::Idle,
            };
        }
    }

    /// Delivers `reply` and ends the attempt.
    fn finish(&mut self, attempt: usize, reply: Reply) {
        self.answer(attempt, reply);
        self.attempts.remove(attempt);
    }

    /// The client stops waiting with no answer (it will retry).
    fn drop_client(&mut self, attempt: usize) {
        self.answer(attempt, Reply::Retry);
    }

    /// A fenced settle `UPDATE … set status = $s where id = $1 and attempt = $2 and
    /// status = 'in_flight'`.
    fn settle_row(&mut self, row_id: Option<u8>, token: u8, status: Status) -> bool {
        match &mut self.row {
            Some(row)
                if row_id.is_none_or(|id| id == row.id)
                    && row.attempt == token
                    && row.status == Status::InFlight =>
            {
                row.status = status;
                true
            }
            _ => false,
        }
    }

    /// Rolls back the attempt's transaction: its row lock goes, its writes were never visible.
    fn unlock(&mut self, token: u8) {
        if let Some(row) = &mut self.row {
            if row.locked_by == Some(token) {
                row.locked_by = None;
            }
        }
    }
}

impl ClaimProtocol {
    /// Whether the key row is free for a claim of `body`: absent, expired, or released with
    /// the same request hash (change (2): a released row of another body is a mismatch).
    fn free_for(row: Option<&Row>, body: u8) -> bool {
        row.is_none_or(|row| row.expired || (row.status == Status::Released && row.hash == body))
    }

    /// The upsert's write when it wins: a new row, or the old one taken over. An expired row
    /// starts a new lifetime (new lineage); a released one keeps its lineage.
    fn take(&self, s: &mut State, body: u8) -> Round {
        let token = s.new_token();
        let (row_id, lineage) = match s.row {
            Some(row) if !row.expired => {
                if row.status == Status::Released {
                    s.events |= event::RELEASED_TAKEN_OVER;
                }
                (row.id, row.lineage)
            }
            Some(row) => {
                s.lifetimes += 1;
                (row.id, s.lifetimes - 1)
            }
            None => {
                s.lifetimes += 1;
                s.next_row_id += 1;
                (s.next_row_id - 1, s.lifetimes - 1)
            }
        };
        s.row = Some(Row {
            id: row_id,
            status: Status::InFlight,
            attempt: token,
            lineage,
            hash: body,
            stale: false,
            expired: false,
            response: None,
            locked_by: None,
        });
        Round::Won {
            token,
            lineage,
            row_id,
        }
    }

    /// `Idempotency::round`: `insert … on conflict do update … where expired or (released and
    /// same request_hash) returning`, union the existing (unexpired) row.
    fn claim_statement(&self, s: &mut State, body: u8) -> Round {
        match s.row {
            Some(row) if !Self::free_for(Some(&row), body) => Round::Existing(row),
            _ => self.take(s, body),
        }
    }

    /// `Idempotency::judge` on the row a round read (and the replay's audit row).
    fn judge(&self, s: &mut State, i: usize, row: Row, rounds: u8) {
        let body = s.attempts[i].body;
        if row.hash != body {
            return s.finish(i, Reply::Final(Final::Mismatch));
        }
        match row.status {
            Status::Completed => {
                // A completed row always carries its response; one without is no replay.
                let Some(resp) = row.response else {
                    return s.finish(i, Reply::Retry);
                };
                if let Err(at) = s.replay_audits.binary_search(&resp) {
                    s.replay_audits.insert(at, resp);
                }
                s.finish(
                    i,
                    Reply::Final(Final::Stored {
                        lineage: row.lineage,
                        resp,
                        replayed: true,
                    }),
                );
            }
            Status::Failed => s.finish(i, Reply::Final(Final::PreviousFailed)),
            // Freed between the upsert and the read: claim again (only reachable when the
            // claim is not one statement).
            Status::Released => self.again(s, i, rounds),
            Status::InFlight if row.stale && !self.is(Mutant::NoStaleTakeover) => {
                s.attempts[i].pc = Pc::ReleaseStale {
                    row_id: row.id,
                    attempt: row.attempt,
                    rounds,
                };
            }
            Status::InFlight => s.finish(i, Reply::Retry),
        }
    }

    /// `Judgement::Again`: the next round, or after three `409` "changing hands".
    fn again(&self, s: &mut State, i: usize, rounds: u8) {
        if rounds + 1 >= 3 {
            s.finish(i, Reply::Retry);
        } else {
            s.attempts[i].pc = Pc::Round {
                rounds: rounds + 1,
                orphan: false,
            };
        }
    }

    /// A round's result, for the request (or for its orphaned task).
    fn after_round(&self, s: &mut State, i: usize, round: Round, rounds: u8, orphan: bool) {
        match (round, orphan) {
            (Round::Won { token, row_id, .. }, true) => {
                s.attempts[i].pc = Pc::ReleaseWon { token, row_id };
            }
            (Round::Existing(_), true) => {
                s.attempts.remove(i);
            }
            (
                Round::Won {
                    token,
                    lineage,
                    row_id,
                },
                false,
            ) => {
                // `Idempotency::won`: the guard is armed and the business transaction begins.
                s.attempts[i].pc = Pc::Executing {
                    token,
                    lineage,
                    row_id,
                };
            }
            (Round::Existing(row), false) => self.judge(s, i, row, rounds),
        }
    }

    /// `Idempotency::no_connection`: fail-closed answers 503, fail-open runs untracked.
    fn no_connection(&self, s: &mut State, i: usize, cause: StoreFault) {
        match s.tier {
            Tier::FailClosed => s.finish(i, Reply::Retry),
            Tier::FailOpen => {
                let token = s.new_token();
                s.attempts[i].pc = Pc::Untracked { token, cause };
            }
        }
    }

    fn attempt_actions(&self, s: &State, i: usize, actions: &mut Vec<Action>) {
        let a = s.attempts[i];
        let faults = s.faults_left > 0;
        let free = s.lock_free();
        let mut push = |step| {
            actions.push(Action::Step {
                attempt: u8::try_from(i).unwrap_or(u8::MAX),
                step,
            })
        };
        match a.pc {
            Pc::Round { orphan, .. } => {
                if free {
                    push(Step::Claim);
                }
                if !orphan && faults {
                    if !free {
                        push(Step::ClaimLockTimeout);
                    }
                    if free && !Self::free_for(s.row.as_ref(), a.body) {
                        push(Step::ClaimVanished);
                    }
                    push(Step::ClaimUnreachable);
                    push(Step::ClaimPoolBusy);
                    push(Step::ClaimTimeout);
                    if free {
                        push(Step::ClaimConnLost { executed: true });
                    }
                    push(Step::ClaimConnLost { executed: false });
                }
            }
            Pc::Selected { .. } => {
                if free {
                    push(Step::ClaimInsert);
                }
            }
            Pc::ReleaseStale { .. } => {
                if free {
                    push(Step::ReleaseStale);
                }
                if faults {
                    push(Step::ReleaseStaleFailed);
                }
            }
            Pc::Executing { .. } => {
                if free {
                    push(Step::Complete(Code::Success));
                    push(Step::Complete(Code::Rejection));
                }
                push(Step::ServerError);
                push(Step::Refuse);
                if faults {
                    push(Step::Retryable503);
                }
            }
            Pc::CompletingAlone { .. } => {
                if free {
                    push(Step::CompleteAlone);
                }
                if faults {
                    push(Step::CompleteAloneFailed);
                }
            }
            Pc::Committing { .. } => {
                push(Step::Commit);
                if faults {
                    push(Step::CommitLost { landed: true });
                    push(Step::CommitLost { landed: false });
                }
            }
            Pc::Settling { how, .. } => {
                if free {
                    push(Step::Settle(how));
                }
                if faults {
                    push(Step::SettleLost);
                }
            }
            Pc::ReleaseWon { .. } => {
                if free {
                    push(Step::ReleaseWon);
                }
            }
            Pc::ReleaseAttempt { .. } => {
                if free {
                    push(Step::ReleaseAttempt);
                }
            }
            Pc::Landing => {
                if free {
                    push(Step::Claim);
                }
            }
            Pc::Untracked { .. } => push(Step::CommitUntracked),
        }
        if faults {
            push(Step::Crash);
            let cancellable = matches!(
                a.pc,
                Pc::Round { orphan: false, .. }
                    | Pc::Selected { orphan: false, .. }
                    | Pc::ReleaseStale { .. }
                    | Pc::Executing { .. }
                    | Pc::CompletingAlone { .. }
                    | Pc::Committing { .. }
                    | Pc::Untracked { .. }
            );
            // The client went away, or the server's request timeout fired.
            if cancellable {
                push(Step::Cancel);
            }
            if matches!(a.pc, Pc::Committing { .. }) {
                push(Step::CancelCommitLanded);
            }
            if a.waiting {
                push(Step::Detach);
            }
        }
    }

    fn step(&self, s: &mut State, i: usize, step: Step) {
        let a = s.attempts[i];
        match (a.pc, step) {
            (Pc::Round { rounds, orphan }, Step::Claim) => {
                if self.is(Mutant::SelectThenInsert) {
                    // The SELECT: free means "insert next", anything else is judged as read.
                    match s.row {
                        Some(row) if !Self::free_for(Some(&row), a.body) => {
                            self.after_round(s, i, Round::Existing(row), rounds, orphan)
                        }
                        _ => s.attempts[i].pc = Pc::Selected { rounds, orphan },
                    }
                } else {
                    let round = self.claim_statement(s, a.body);
                    self.after_round(s, i, round, rounds, orphan);
                }
            }
            (Pc::Landing, Step::Claim) => {
                // Whatever it wins stays in flight under a token nobody holds, until stale.
                self.claim_statement(s, a.body);
                s.attempts.remove(i);
            }
            (Pc::Round { rounds, orphan }, Step::ClaimVanished) => {
                s.spend_fault();
                if orphan {
                    s.attempts.remove(i);
                } else {
                    self.again(s, i, rounds);
                }
            }
            (Pc::Selected { rounds, orphan }, Step::ClaimInsert) => {
                // The unguarded upsert: whatever the row is now, it is taken.
                let round = self.take(s, a.body);
                self.after_round(s, i, round, rounds, orphan);
            }
            (Pc::Round { .. }, Step::ClaimLockTimeout) => {
                // The row lock was seen, the store answered: 409 on every tier.
                s.spend_fault();
                s.finish(i, Reply::Retry);
            }
            (Pc::Round { .. }, Step::ClaimUnreachable) => {
                s.spend_fault();
                self.no_connection(s, i, StoreFault::Unreachable);
            }
            (Pc::Round { .. }, Step::ClaimPoolBusy) => {
                s.spend_fault();
                if self.is(Mutant::FailOpenOnBusyPool) {
                    self.no_connection(s, i, StoreFault::PoolBusy);
                } else {
                    s.finish(i, Reply::Retry);
                }
            }
            (Pc::Round { rounds, .. }, Step::ClaimTimeout) => {
                // 503 on every tier; the round's task goes on and releases what it wins.
                s.spend_fault();
                s.answer(i, Reply::Retry);
                s.attempts[i].pc = Pc::Round {
                    rounds,
                    orphan: true,
                };
            }
            (Pc::Round { .. }, Step::ClaimConnLost { executed }) => {
                s.spend_fault();
                if executed && !self.is(Mutant::SelectThenInsert) {
                    if let Round::Won { token, .. } = self.claim_statement(s, a.body) {
                        s.attempts[i].pc = Pc::ReleaseAttempt { token };
                        return;
                    }
                }
                // Nothing of this attempt is in the row: `release_attempt` matches nothing. The
                // statement may still be on its way and land later (`Landing`).
                s.answer(i, Reply::Retry);
                if executed {
                    s.attempts.remove(i);
                } else {
                    s.attempts[i].pc = Pc::Landing;
                }
            }
            (
                Pc::ReleaseStale {
                    row_id,
                    attempt,
                    rounds,
                },
                Step::ReleaseStale,
            ) => {
                if s.settle_row(Some(row_id), attempt, Status::Released) {
                    s.events |= event::STALE_RELEASED;
                    // 409, retry_after_ms 0: "an abandoned attempt was released; retry now".
                    s.finish(i, Reply::Retry);
                } else {
                    self.again(s, i, rounds);
                }
            }
            (Pc::ReleaseStale { .. }, Step::ReleaseStaleFailed) => {
                s.spend_fault();
                s.finish(i, Reply::Retry);
            }
            (
                Pc::Executing {
                    token,
                    lineage,
                    row_id,
                },
                Step::Complete(code),
            ) => {
                let fence = !self.is(Mutant::NoFence);
                let matched = match &mut s.row {
                    Some(row)
                        if row.id == row_id
                            && row.status == Status::InFlight
                            && (!fence || row.attempt == token) =>
                    {
                        row.locked_by = Some(token);
                        true
                    }
                    _ => false,
                };
                if matched {
                    s.attempts[i].pc = Pc::Committing {
                        token,
                        lineage,
                        code,
                    };
                } else {
                    // Fenced off: rolled back, the guard disarmed, 409 "retry with the same key".
                    s.events |= event::FENCED;
                    s.finish(i, Reply::Retry);
                }
            }
            (
                Pc::Executing {
                    token,
                    lineage,
                    row_id,
                },
                Step::Refuse,
            ) => {
                s.attempts[i].pc = Pc::CompletingAlone {
                    token,
                    lineage,
                    row_id,
                };
            }
            (
                Pc::CompletingAlone {
                    token,
                    lineage,
                    row_id,
                },
                Step::CompleteAlone,
            ) => {
                let resp = Resp {
                    token,
                    code: Code::Refusal,
                    body: a.body,
                };
                let matched = match &mut s.row {
                    Some(row)
                        if row.id == row_id
                            && row.attempt == token
                            && row.status == Status::InFlight =>
                    {
                        row.status = Status::Completed;
                        row.response = Some(resp);
                        true
                    }
                    _ => false,
                };
                if matched {
                    s.finish(
                        i,
                        Reply::Final(Final::Stored {
                            lineage,
                            resp,
                            replayed: false,
                        }),
                    );
                } else {
                    s.events |= event::FENCED;
                    s.finish(i, Reply::Retry);
                }
            }
            (Pc::CompletingAlone { token, row_id, .. }, Step::CompleteAloneFailed) => {
                s.spend_fault();
                s.attempts[i].pc = Pc::Settling {
                    token,
                    row_id,
                    how: Settle::Retryable,
                };
            }
            (Pc::Executing { token, row_id, .. }, Step::Retryable503) => {
                s.spend_fault();
                s.attempts[i].pc = Pc::Settling {
                    token,
                    row_id,
                    how: Settle::Retryable,
                };
            }
            (Pc::Executing { token, row_id, .. }, Step::ServerError) => {
                s.attempts[i].pc = Pc::Settling {
                    token,
                    row_id,
                    how: Settle::Failed,
                };
            }
            (
                Pc::Committing {
                    token,
                    lineage,
                    code,
                },
                Step::Commit,
            ) => {
                let row = self.commit(s, token, lineage, code, a.body);
                s.finish(
                    i,
                    Reply::Final(Final::Stored {
                        lineage,
                        resp: Resp {
                            token,
                            code,
                            body: a.body,
                        },
                        replayed: false,
                    }),
                );
                debug_assert!(row.is_some());
            }
            (
                Pc::Committing {
                    token,
                    lineage,
                    code,
                },
                Step::CommitLost { landed },
            ) => {
                s.spend_fault();
                if landed {
                    s.events |= event::LOST_COMMIT_LANDED;
                    self.commit(s, token, lineage, code, a.body);
                } else {
                    s.unlock(token);
                }
                let row_id = s.row.map_or(u8::MAX, |row| row.id);
                // `settle_error(503)`: release (a landed commit left nothing to release).
                s.attempts[i].pc = Pc::Settling {
                    token,
                    row_id,
                    how: Settle::Retryable,
                };
            }
            (Pc::Settling { token, row_id, how }, Step::Settle(_)) => {
                let (status, reply) = match how {
                    Settle::Retryable => (Status::Released, Reply::Retry),
                    Settle::Failed => (Status::Failed, Reply::Final(Final::ServerError)),
                    Settle::Cancelled => (Status::Released, Reply::Retry),
                };
                s.settle_row(Some(row_id), token, status);
                s.finish(i, reply);
            }
            (Pc::Settling { how, .. }, Step::SettleLost) => {
                s.spend_fault();
                let reply = match how {
                    Settle::Failed => Reply::Final(Final::ServerError),
                    Settle::Retryable | Settle::Cancelled => Reply::Retry,
                };
                s.finish(i, reply);
            }
            (Pc::ReleaseWon { token, row_id }, Step::ReleaseWon) => {
                s.settle_row(Some(row_id), token, Status::Released);
                s.attempts.remove(i);
            }
            (Pc::ReleaseAttempt { token }, Step::ReleaseAttempt) => {
                s.settle_row(None, token, Status::Released);
                s.finish(i, Reply::Retry);
            }
            (Pc::Untracked { token, cause }, Step::CommitUntracked) => {
                let tier = s.tier;
                s.effects.push(Effect::Untracked { token, cause, tier });
                s.finish(i, Reply::Final(Final::Untracked { token }));
            }
            (_, Step::Crash) => {
                // A transaction the process had open keeps the row's lock until Postgres ends
                // the dead session (`SessionEnds`).
                s.spend_fault();
                s.drop_client(i);
                s.attempts.remove(i);
            }
            (
                Pc::Committing {
                    token,
                    lineage,
                    code,
                },
                Step::CancelCommitLanded,
            ) => {
                s.spend_fault();
                s.drop_client(i);
                self.commit(s, token, lineage, code, a.body);
                let row_id = s.row.map_or(u8::MAX, |row| row.id);
                // `KeyGuard::drop`: the release it spawns finds the row completed.
                s.attempts[i].pc = Pc::Settling {
                    token,
                    row_id,
                    how: Settle::Cancelled,
                };
            }
            (pc, Step::Cancel) => {
                s.spend_fault();
                s.drop_client(i);
                match pc {
                    // The round's task outlives the request (`UntakenWin`).
                    Pc::Round { rounds, .. } => {
                        s.attempts[i].pc = Pc::Round {
                            rounds,
                            orphan: true,
                        }
                    }
                    Pc::Selected { rounds, .. } => {
                        s.attempts[i].pc = Pc::Selected {
                            rounds,
                            orphan: true,
                        }
                    }
                    // `KeyGuard::drop`: rolled back, the release runs in a spawned task.
                    Pc::Executing { token, row_id, .. }
                    | Pc::CompletingAlone { token, row_id, .. } => {
                        s.attempts[i].pc = Pc::Settling {
                            token,
                            row_id,
                            how: Settle::Cancelled,
                        }
                    }
                    Pc::Committing { token, .. } => {
                        s.unlock(token);
                        let row_id = s.row.map_or(u8::MAX, |row| row.id);
                        s.attempts[i].pc = Pc::Settling {
                            token,
                            row_id,
                            how: Settle::Cancelled,
                        }
                    }
                    // Nothing written yet, nothing to undo.
                    _ => {
                        s.attempts.remove(i);
                    }
                }
            }
            (_, Step::Detach) => {
                s.spend_fault();
                s.drop_client(i);
            }
            // Not enabled in this state (`actions` never offers it).
            _ => {}
        }
    }

    /// COMMIT of a business transaction whose completion matched: the effect and the completed
    /// row become visible together. Returns the row as committed.
    fn commit(&self, s: &mut State, token: u8, lineage: u8, code: Code, body: u8) -> Option<Row> {
        let row = s.row.as_mut()?;
        row.status = Status::Completed;
        row.response = Some(Resp { token, code, body });
        row.locked_by = None;
        let row = *row;
        s.effects.push(Effect::Tracked {
            token,
            lineage,
            row: (row.lineage, row.attempt, row.response),
        });
        Some(row)
    }
}

impl ClaimProtocol {
    /// Whether a step is the adversary's (it spends the budget, or it is the key's expiry,
    /// which no retrying client waits for). The liveness check lets only the other steps lead
    /// to the goal: a client's answer must not depend on a fault, a changed body or an expiry.
    pub fn adversarial(&self, before: &State, action: &Action, after: &State) -> bool {
        after.faults_left < before.faults_left || matches!(action, Action::Expire)
    }
}

impl Model for ClaimProtocol {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        self.tiers
            .iter()
            .map(|&tier| State {
                tier,
                row: None,
                effects: Vec::new(),
                replay_audits: Vec::new(),
                clients: vec![Client::Idle; usize::from(self.bounds.clients)],
                bodies: vec![0; usize::from(self.bounds.clients)],
                attempts: Vec::new(),
                next_token: 0,
                next_row_id: 0,
                lifetimes: 0,
                expiries_left: self.bounds.lifetimes.saturating_sub(1),
                faults_left: self.bounds.faults,
                events: 0,
            })
            .collect()
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        for (c, client) in s.clients.iter().enumerate() {
            if *client == Client::Idle {
                // The same request again, or (the adversary's choice) another body.
                for body in 0..self.bounds.bodies {
                    if body == s.bodies[c] || s.faults_left > 0 {
                        actions.push(Action::Send {
                            client: u8::try_from(c).unwrap_or(u8::MAX),
                            body,
                        });
                    }
                }
            }
        }
        for i in 0..s.attempts.len() {
            self.attempt_actions(s, i, actions);
        }
        if let Some(row) = s.row {
            // The stale threshold passes for the row's attempt: free once that attempt is gone
            // (time passes), a fault while it is alive (it was paused past the threshold).
            if row.status == Status::InFlight
                && !row.stale
                && (s.faults_left > 0 || !s.holder_alive(row.attempt))
            {
                actions.push(Action::Stale);
            }
            if !row.expired && s.expiries_left > 0 {
                actions.push(Action::Expire);
            }
            if row.expired && row.locked_by.is_none() {
                actions.push(Action::Cleanup);
            }
            if row.locked_by.is_some_and(|token| !s.holder_alive(token)) {
                actions.push(Action::SessionEnds);
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Send { client, body } => {
                if s.bodies[usize::from(client)] != body {
                    s.spend_fault();
                    s.bodies[usize::from(client)] = body;
                }
                s.clients[usize::from(client)] = Client::Waiting;
                s.attempts.push(Attempt {
                    pc: Pc::Round {
                        rounds: 0,
                        orphan: false,
                    },
                    client,
                    waiting: true,
                    body,
                });
            }
            Action::Step { attempt, step } => self.step(&mut s, usize::from(attempt), step),
            Action::Stale => {
                if let Some(row) = s.row {
                    if s.holder_alive(row.attempt) {
                        s.spend_fault();
                    }
                }
                if let Some(row) = &mut s.row {
                    row.stale = true;
                }
            }
            Action::Expire => {
                s.expiries_left -= 1;
                if let Some(row) = &mut s.row {
                    row.expired = true;
                }
            }
            Action::Cleanup => s.row = None,
            Action::SessionEnds => {
                if let Some(row) = &mut s.row {
                    row.locked_by = None;
                }
            }
        }
        s.attempts.sort_unstable();
        if self.symmetry {
            s = s.canonical();
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        crate::properties::all()
    }
}
