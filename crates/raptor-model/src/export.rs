//! Traces for the conformance replay (`tests/api/conformance.rs`), which runs each one through
//! the service's own statements on real Postgres and checks, after every step, that the
//! database is in the state the model says: each `sometimes` scenario's shortest witness, each
//! safety mutant's shortest counterexample, and seeded random walks.
//!
//! Everything here is computed without symmetry reduction, so a trace keeps its clients' and
//! attempts' identities from one step to the next.

use stateright::{Expectation, Model};

use crate::code::{Kind, Transition};
use crate::liveness::{self, Trace};
use crate::model::{Action, Pc, Settle, State, Status, Step};
use crate::{Bounds, ClaimProtocol, Mutant, Tier};

/// A trace with a name: which scenario or mutant it shows, or which seed drew it.
pub struct Named {
    /// What the trace shows.
    pub name: String,
    /// The model it was drawn from (its mutant, if any, tells the replay what to expect).
    pub model: ClaimProtocol,
    /// `states[0]` is the initial state; `actions[i]` leads from `states[i]` to `states[i + 1]`.
    pub trace: Trace<State, Action>,
}

/// The bounds witnesses are searched at: two clients, two bodies, two lifetimes, a budget of
/// three.
pub const BOUNDS: Bounds = Bounds::TESTS[0];

/// The bounds walks are drawn at: larger than any exhaustive check, since a walk visits one
/// path only (three clients, two bodies, three lifetimes, a budget of five).
pub const WALK_BOUNDS: Bounds = Bounds {
    clients: 3,
    bodies: 2,
    lifetimes: 3,
    faults: 5,
};

/// The shortest witness of every `sometimes` property on both tiers (a scenario the bound does
/// not reach is left out; the model's own tests say which must be reached).
pub fn witnesses() -> Vec<Named> {
    let model = ClaimProtocol::new(BOUNDS);
    model
        .properties()
        .into_iter()
        .filter(|p| p.expectation == Expectation::Sometimes)
        .filter_map(|p| {
            let condition = p.condition;
            let trace = liveness::shortest(&model, |s| condition(&model, s))?;
            Some(Named {
                name: format!("witness: {}", p.name),
                model: model.clone(),
                trace,
            })
        })
        .collect()
}

/// For every transition of the protocol and the adversary, the shortest trace that ends by
/// taking it: so that each statement, each fault and each clock step is replayed at least once
/// (a random walk may never reach a claim blocked by a completion's lock).
pub fn transition_witnesses() -> Vec<Named> {
    let model = ClaimProtocol::new(BOUNDS);
    let enabled = |s: &State, t: Transition| {
        let mut actions = Vec::new();
        model.actions(s, &mut actions);
        actions.into_iter().find(|a| a.transition(None) == t)
    };
    Transition::ALL
        .iter()
        .filter(|t| t.kind() != Kind::Mutant)
        .filter_map(|&t| {
            let (mut states, mut actions) =
                liveness::shortest(&model, |s| enabled(s, t).is_some())?;
            let last = states.last()?;
            let action = enabled(last, t)?;
            let next = model.next_state(last, action)?;
            actions.push(action);
            states.push(next);
            Some(Named {
                name: format!("transition: {}", t.name()),
                model: model.clone(),
                trace: (states, actions),
            })
        })
        .collect()
}

/// Traces that end in a fenced statement that must change nothing: the settle of an attempt
/// whose COMMIT landed (a lost reply, or a cancel during the COMMIT) finds its row completed.
/// A walk may never take one; a statement that lost its fence (`status = 'in_flight'`) is
/// caught only here.
pub fn fence_witnesses() -> Vec<Named> {
    let model = ClaimProtocol::new(BOUNDS);
    let settle_on_completed = |s: &State| {
        s.attempts.iter().enumerate().find_map(|(i, a)| match a.pc {
            Pc::Settling { token, .. }
                if s.row
                    .is_some_and(|row| row.status == Status::Completed && row.attempt == token) =>
            {
                let mut actions = Vec::new();
                model.actions(s, &mut actions);
                actions.into_iter().find(|action| {
                    matches!(action, Action::Step { attempt, step: Step::Settle(_) }
                        if usize::from(*attempt) == i)
                })
            }
            _ => None,
        })
    };
    let mut traces = Vec::new();
    for how in [Settle::Retryable, Settle::Cancelled] {
        let found = liveness::shortest(&model, |s| {
            settle_on_completed(s).is_some()
                && s.attempts
                    .iter()
                    .any(|a| matches!(a.pc, Pc::Settling { how: h, .. } if h == how))
        });
        let Some((mut states, mut actions)) = found else {
            continue;
        };
        let Some(last) = states.last() else { continue };
        let Some(action) = settle_on_completed(last) else {
            continue;
        };
        let Some(next) = model.next_state(last, action) else {
            continue;
        };
        actions.push(action);
        states.push(next);
        traces.push(Named {
            name: format!("fence: a {how:?} settle after its commit landed"),
            model: model.clone(),
            trace: (states, actions),
        });
    }
    traces
}

/// The shortest counterexample of a safety mutant: a path on which the mutant's model breaks
/// an `always` property. `None` for a mutant that breaks none (a liveness mutant).
pub fn counterexample(mutant: Mutant) -> Option<Named> {
    let model = ClaimProtocol::new(Bounds::MUTANTS).with_mutant(mutant);
    let properties: Vec<_> = model
        .properties()
        .into_iter()
        .filter(|p| p.expectation == Expectation::Always)
        .collect();
    let trace = liveness::shortest(&model, |s| {
        properties.iter().any(|p| !(p.condition)(&model, s))
    })?;
    Some(Named {
        name: format!("counterexample: {mutant:?}"),
        model,
        trace,
    })
}

/// A random walk of at most `steps` steps, drawn from `seed` (the same seed draws the same
/// walk): at every state one of the enabled actions, uniformly. The tier alternates with the
/// seed.
pub fn random_walk(seed: u64, steps: usize) -> Named {
    let tier = if seed.is_multiple_of(2) {
        Tier::FailClosed
    } else {
        Tier::FailOpen
    };
    let model = ClaimProtocol {
        tiers: vec![tier],
        ..ClaimProtocol::new(WALK_BOUNDS)
    };
    let mut rng = SplitMix(seed);
    let mut states = model.init_states();
    states.truncate(1);
    let mut actions = Vec::new();
    let mut enabled = Vec::new();
    while actions.len() < steps {
        let Some(last) = states.last() else { break };
        enabled.clear();
        model.actions(last, &mut enabled);
        if enabled.is_empty() {
            break;
        }
        let pick = usize::try_from(rng.next() % enabled.len() as u64).unwrap_or(0);
        let action = enabled[pick];
        let Some(next) = model.next_state(last, action) else {
            break;
        };
        actions.push(action);
        states.push(next);
    }
    Named {
        name: format!("random walk: seed {seed}"),
        model,
        trace: (states, actions),
    }
}

/// SplitMix64: a small, seedable generator, enough to draw walks.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_draws_the_same_walk_and_seeds_differ() {
        let a = random_walk(7, 40);
        let b = random_walk(7, 40);
        assert_eq!(a.trace.1, b.trace.1);
        let c = random_walk(8, 40);
        assert_ne!(a.trace.1, c.trace.1);
        assert!(a.trace.1.len() > 5, "a walk goes somewhere");
    }

    #[test]
    fn every_scenario_has_a_witness_and_no_fence_a_counterexample() {
        assert_eq!(witnesses().len(), crate::properties::SOMETIMES.len());
        let steps = Transition::ALL
            .iter()
            .filter(|t| t.kind() != Kind::Mutant)
            .count();
        assert_eq!(
            transition_witnesses().len(),
            steps,
            "every transition is reachable"
        );
        assert!(counterexample(Mutant::NoFence).is_some());
        assert_eq!(
            fence_witnesses().len(),
            2,
            "both landed-commit settles are reachable"
        );
        assert!(counterexample(Mutant::NoStaleTakeover).is_none());
    }
}
