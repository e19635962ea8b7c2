//! Traces for people: each step as its transition's name, who took it, and the database as it
//! left it.

use std::fmt::Write;

use crate::model::{
    Action, Attempt, ClaimProtocol, Client, Code, Effect, Final, Pc, Row, State, Status, Step,
};

/// One line per state of a path (`states[0]` is the initial state; `actions[i]` leads from
/// `states[i]` to `states[i + 1]`): the step, who took it, and the key row, the committed
/// effects and the clients after it.
pub fn describe(model: &ClaimProtocol, states: &[State], actions: &[Action]) -> String {
    let mut out = String::new();
    if let Some(first) = states.first() {
        let _ = writeln!(
            out,
            "{:>2}  {:<26} {:<18} {}",
            0,
            format!("start ({:?})", first.tier),
            "",
            summary(first)
        );
    }
    for (n, (action, pair)) in actions.iter().zip(states.windows(2)).enumerate() {
        let [before, after] = pair else { continue };
        let _ = writeln!(
            out,
            "{:>2}  {:<26} {:<18} {}",
            n + 1,
            step_name(model, action),
            actor(before, action),
            summary(after)
        );
    }
    out
}

fn step_name(model: &ClaimProtocol, action: &Action) -> String {
    let name = action.transition(model.mutant).name();
    match action {
        Action::Step { step, .. } => match step {
            Step::Complete(Code::Success) => format!("{name} (2xx)"),
            Step::Complete(Code::Rejection) => format!("{name} (4xx)"),
            Step::ClaimConnLost { executed } => format!("{name} (ran: {executed})"),
            Step::CommitLost { landed } => format!("{name} (landed: {landed})"),
            _ => name.to_owned(),
        },
        Action::Send { body, .. } => format!("{name} (body {body})"),
        _ => name.to_owned(),
    }
}

fn actor(state: &State, action: &Action) -> String {
    match action {
        Action::Send { client, .. } => format!("client {client}"),
        Action::Step { attempt, .. } => state
            .attempts
            .get(usize::from(*attempt))
            .map_or_else(|| String::from("?"), attempt_name),
        Action::Stale | Action::Expire => String::from("clock"),
        Action::Cleanup => String::from("cleanup job"),
        Action::SessionEnds => String::from("postgres"),
    }
}

fn attempt_name(a: &Attempt) -> String {
    match a.pc {
        Pc::Executing { token, .. }
        | Pc::Committing { token, .. }
        | Pc::Settling { token, .. }
        | Pc::ReleaseWon { token, .. }
        | Pc::ReleaseAttempt { token }
        | Pc::Untracked { token, .. } => format!("client {} (#{token})", a.client),
        _ => format!("client {}", a.client),
    }
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
        let _ = write!(text, " locked by #{by}");
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
                Effect::Tracked { token, lineage, .. } => format!("#{token} (lineage {lineage})"),
                Effect::Untracked { token, .. } => format!("#{token} untracked"),
            })
            .collect();
        let _ = write!(text, " | effects: {}", effects.join(", "));
    }
    let clients: Vec<String> = s
        .clients
        .iter()
        .map(|c| match c {
            Client::Idle => String::from("-"),
            Client::Waiting => String::from("waiting"),
            Client::Done(done) => answer(done),
        })
        .collect();
    let _ = write!(text, " | clients: {}", clients.join(", "));
    text
}

fn answer(done: &Final) -> String {
    match done {
        Final::Stored { resp, replayed, .. } => {
            let code = match resp.code {
                Code::Success => "2xx",
                Code::Rejection => "4xx",
                Code::Refusal => "4xx refused",
            };
            let how = if *replayed { " replayed" } else { "" };
            format!("{code} of #{}{how}", resp.token)
        }
        Final::Untracked { token } => format!("2xx untracked #{token}"),
        Final::ServerError => String::from("500"),
        Final::PreviousFailed => String::from("409 previous_failed"),
        Final::Mismatch => String::from("422 mismatch"),
    }
}
