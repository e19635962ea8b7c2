//! Traces for people: each step as its transition's name, who took it, and the database as it
//! left it.

use std::fmt::Write;

use crate::model::{Action, Attempt, ClaimProtocol, Client, Effect, Pc, Row, State, Status, Step};

/// One line per state of a path (`states[0]` is the initial state; `actions[i]` leads from
/// `states[i]` to `states[i + 1]`).
pub fn describe(model: &ClaimProtocol, states: &[State], actions: &[Action]) -> String {
    let mut out = String::new();
    if let Some(first) = states.first() {
        let _ = writeln!(
            out,
            " 0. start ({:?})            {}",
            first.tier,
            summary(first)
        );
    }
    for (n, (action, pair)) in actions.iter().zip(states.windows(2)).enumerate() {
        let [before, after] = pair else { continue };
        let transition = action.transition(model.mutant);
        let who = actor(before, action);
        let _ = writeln!(
            out,
            "{:>2}. {:<22} {:<26} {}",
            n + 1,
            transition.name(),
            who,
            summary(after)
        );
    }
    out
}

fn actor(state: &State, action: &Action) -> String {
    match action {
        Action::Send { client, body } => format!("client {client}, body {body}"),
        Action::Step { attempt, step } => {
            let Some(a) = state.attempts.get(usize::from(*attempt)) else {
                return String::from("?");
            };
            let extra = match step {
                Step::Complete(code) => format!(" {code:?}"),
                Step::ClaimConnLost { executed } => format!(" executed={executed}"),
                Step::CommitLost { landed } => format!(" landed={landed}"),
                _ => String::new(),
            };
            format!("{}{extra}", attempt_name(a))
        }
        Action::Stale | Action::Expire => String::from("clock"),
        Action::Cleanup => String::from("cleanup job"),
    }
}

fn attempt_name(a: &Attempt) -> String {
    let token = match a.pc {
        Pc::Executing { token, .. }
        | Pc::Committing { token, .. }
        | Pc::Settling { token, .. }
        | Pc::ReleaseWon { token, .. }
        | Pc::ReleaseAttempt { token }
        | Pc::Untracked { token, .. } => format!(" (token {token})"),
        _ => String::new(),
    };
    format!("client {}'s request{token}", a.client)
}

fn row(row: &Row) -> String {
    let status = match row.status {
        Status::InFlight => "in_flight",
        Status::Completed => "completed",
        Status::Failed => "failed",
        Status::Released => "released",
    };
    let mut text = format!(
        "row#{} {status} attempt={} lineage={} hash={}",
        row.id, row.attempt, row.lineage, row.hash
    );
    if let Some(resp) = row.response {
        let _ = write!(text, " response=#{}", resp.token);
    }
    if row.stale {
        text.push_str(" stale");
    }
    if row.expired {
        text.push_str(" expired");
    }
    if let Some(by) = row.locked_by {
        let _ = write!(text, " locked-by-{by}");
    }
    text
}

/// The database and the clients, briefly.
pub fn summary(s: &State) -> String {
    let mut text = s.row.as_ref().map_or_else(|| String::from("no row"), row);
    if !s.effects.is_empty() {
        let effects: Vec<String> = s
            .effects
            .iter()
            .map(|e| match e {
                Effect::Tracked { token, lineage, .. } => format!("#{token}@L{lineage}"),
                Effect::Untracked { token, .. } => format!("#{token} untracked"),
            })
            .collect();
        let _ = write!(text, " | effects {}", effects.join(","));
    }
    let clients: Vec<String> = s
        .clients
        .iter()
        .map(|c| match c {
            Client::Idle => String::from("-"),
            Client::Waiting => String::from("…"),
            Client::Done(done) => format!("{done:?}"),
        })
        .collect();
    let _ = write!(text, " | clients [{}]", clients.join("; "));
    text
}
