//! The properties checked in every reachable state (`always`), on every maximal path
//! (`eventually`), and the scenarios that must be reachable (`sometimes`: they keep the model
//! from passing vacuously).

use stateright::Property;

use crate::model::{
    event, ClaimProtocol, Client, Code, Effect, Final, Pc, State, Status, StoreFault, Tier,
};

/// At most one business effect per key lifetime.
pub const AT_MOST_ONCE: &str = "at most one business effect per key lifetime";
/// A completed key row stores the response of the execution that committed it, and that
/// execution's effect exists.
pub const COMPLETED_ROW_HAS_ITS_EFFECT: &str =
    "a completed row stores the response of the one execution that committed it";
/// Every committed effect completed its own claim's row, in the same commit.
pub const EFFECT_COMPLETES_ITS_ROW: &str =
    "no effect without its completed key row in the same commit";
/// Every stored answer (2xx or 4xx, fresh or replayed) of one lifetime is the same response.
pub const ANSWERS_AGREE: &str = "every stored answer of a lifetime is the same response";
/// Every stored answer is the response to the same request (body) as the client's, and a
/// completed row stores the response to its own `request_hash`.
pub const ANSWER_IS_TO_THE_REQUEST: &str =
    "every stored answer is the response to the same request";
/// Every `idempotency_replay` audit row names an execution that committed.
pub const REPLAY_AUDIT_NAMES_ORIGINAL: &str = "every replay audit row names a committed execution";
/// A request runs without dedup only on Tier 2 and only when no connection could be made.
pub const FAIL_OPEN_ONLY_UNREACHABLE: &str =
    "a fail-open execution happens only on Tier 2 with the store unreachable";
/// Every client (they all keep retrying) ends with a final answer.
pub const EVERY_CLIENT_ANSWERED: &str = "every retrying client eventually gets a final answer";

/// The names of the `sometimes` properties (each must be reached in the bounded check).
pub const SOMETIMES: &[&str] = &[
    "an execution commits",
    "a replay is answered",
    "a stale row is released by another request",
    "a stale attempt's completion is fenced off",
    "a released key is claimed again and committed",
    "a second lifetime commits",
    "a Tier 2 request fails open",
    "a different body is refused",
    "a failed key refuses its retry",
    "a lost commit that landed is replayed",
    "a refusal stored on its own is replayed",
];

/// Every property of the model.
pub fn all() -> Vec<Property<ClaimProtocol>> {
    vec![
        Property::always(AT_MOST_ONCE, |_, s: &State| at_most_once(s)),
        Property::always(COMPLETED_ROW_HAS_ITS_EFFECT, |_, s: &State| {
            completed_row_has_its_effect(s)
        }),
        Property::always(EFFECT_COMPLETES_ITS_ROW, |_, s: &State| {
            effect_completes_its_row(s)
        }),
        Property::always(ANSWERS_AGREE, |_, s: &State| answers_agree(s)),
        Property::always(ANSWER_IS_TO_THE_REQUEST, |_, s: &State| {
            answer_is_to_the_request(s)
        }),
        Property::always(REPLAY_AUDIT_NAMES_ORIGINAL, |_, s: &State| {
            replay_audits_named(s)
        }),
        Property::always(FAIL_OPEN_ONLY_UNREACHABLE, |_, s: &State| {
            fail_open_only_unreachable(s)
        }),
        Property::eventually(EVERY_CLIENT_ANSWERED, |_, s: &State| all_answered(s)),
        Property::sometimes(SOMETIMES[0], |_, s: &State| {
            s.effects
                .iter()
                .any(|e| matches!(e, Effect::Tracked { .. }))
        }),
        Property::sometimes(SOMETIMES[1], |_, s: &State| {
            s.clients
                .iter()
                .any(|c| matches!(c, Client::Done(Final::Stored { replayed: true, .. })))
        }),
        Property::sometimes(SOMETIMES[2], |_, s: &State| {
            s.events & event::STALE_RELEASED != 0
        }),
        Property::sometimes(SOMETIMES[3], |_, s: &State| s.events & event::FENCED != 0),
        Property::sometimes(SOMETIMES[4], |_, s: &State| {
            s.events & event::RELEASED_TAKEN_OVER != 0
                && s.row.is_some_and(|row| row.status == Status::Completed)
        }),
        Property::sometimes(SOMETIMES[5], |_, s: &State| second_lifetime_committed(s)),
        Property::sometimes(SOMETIMES[6], |_, s: &State| {
            s.effects
                .iter()
                .any(|e| matches!(e, Effect::Untracked { .. }))
        }),
        Property::sometimes(SOMETIMES[7], |_, s: &State| {
            s.clients.contains(&Client::Done(Final::Mismatch))
        }),
        Property::sometimes(SOMETIMES[8], |_, s: &State| {
            s.clients.contains(&Client::Done(Final::PreviousFailed))
        }),
        Property::sometimes(SOMETIMES[9], |_, s: &State| {
            s.events & event::LOST_COMMIT_LANDED != 0
                && s.clients
                    .iter()
                    .any(|c| matches!(c, Client::Done(Final::Stored { replayed: true, .. })))
        }),
        Property::sometimes(SOMETIMES[10], |_, s: &State| {
            s.clients.iter().any(|c| {
                matches!(c, Client::Done(Final::Stored { replayed: true, resp, .. })
                    if resp.code == Code::Refusal)
            })
        }),
    ]
}

/// Whether every client has its final answer (the liveness goal).
pub fn all_answered(s: &State) -> bool {
    s.clients.iter().all(|c| matches!(c, Client::Done(_)))
}

fn replay_audits_named(s: &State) -> bool {
    // A refusal is stored without an effect (its writes rolled back): its replays name it.
    s.replay_audits
        .iter()
        .all(|resp| resp.code == Code::Refusal || committed(s, resp.token))
}

fn second_lifetime_committed(s: &State) -> bool {
    s.effects
        .iter()
        .any(|e| matches!(*e, Effect::Tracked { lineage, .. } if lineage > 0))
}

fn committed(s: &State, token: u8) -> bool {
    s.effects
        .iter()
        .any(|e| matches!(e, Effect::Tracked { token: t, .. } if *t == token))
}

fn at_most_once(s: &State) -> bool {
    let mut seen: u32 = 0;
    for effect in &s.effects {
        if let Effect::Tracked { lineage, .. } = effect {
            let bit = 1u32 << (lineage % 32);
            if seen & bit != 0 {
                return false;
            }
            seen |= bit;
        }
    }
    true
}

fn completed_row_has_its_effect(s: &State) -> bool {
    let Some(row) = s.row else {
        return true;
    };
    if row.status != Status::Completed {
        return true;
    }
    let has_effect = s.effects.iter().any(|e| {
        matches!(e, Effect::Tracked { token, lineage, .. }
            if *token == row.attempt && *lineage == row.lineage)
    });
    // A stored refusal is the one execution's answer, and that execution committed nothing.
    row.response
        .is_some_and(|resp| resp.token == row.attempt && (resp.code == Code::Refusal) != has_effect)
}

fn effect_completes_its_row(s: &State) -> bool {
    s.effects.iter().all(|e| match *e {
        Effect::Tracked {
            token,
            lineage,
            row: (row_lineage, row_attempt, response),
        } => {
            row_lineage == lineage
                && row_attempt == token
                && response.is_some_and(|resp| resp.token == token)
        }
        Effect::Untracked { .. } => true,
    })
}

fn answers_agree(s: &State) -> bool {
    let stored = s.clients.iter().filter_map(|c| match c {
        Client::Done(Final::Stored { lineage, resp, .. }) => Some((*lineage, *resp)),
        _ => None,
    });
    let mut first: [Option<crate::model::Resp>; 8] = [None; 8];
    for (lineage, resp) in stored {
        let slot = &mut first[usize::from(lineage % 8)];
        match slot {
            Some(seen) if *seen != resp => return false,
            _ => *slot = Some(resp),
        }
    }
    // The row still answering for that lifetime answers the same.
    match s.row {
        Some(row) if row.status == Status::Completed => {
            first[usize::from(row.lineage % 8)].is_none_or(|seen| row.response == Some(seen))
        }
        _ => true,
    }
}

fn answer_is_to_the_request(s: &State) -> bool {
    let clients = s.clients.iter().zip(&s.bodies).all(|(c, body)| match c {
        Client::Done(Final::Stored { resp, .. }) => resp.body == *body,
        _ => true,
    });
    let row = s.row.is_none_or(|row| {
        row.status != Status::Completed || row.response.is_some_and(|resp| resp.body == row.hash)
    });
    clients && row
}

fn fail_open_only_unreachable(s: &State) -> bool {
    let effects_ok = s.effects.iter().all(|e| match *e {
        Effect::Untracked { cause, tier, .. } => {
            cause == StoreFault::Unreachable && tier == Tier::FailOpen
        }
        Effect::Tracked { .. } => true,
    });
    // Also at the decision, before the execution commits.
    let decisions_ok = s.attempts.iter().all(|a| match a.pc {
        Pc::Untracked { cause, .. } => cause == StoreFault::Unreachable && s.tier == Tier::FailOpen,
        _ => true,
    });
    effects_ok && decisions_ok
}
