//! The bounded model check of the claim protocol (`Bounds::TESTS`), and the mutants it must
//! catch. `make model` runs a larger bound.

use std::collections::{HashSet, VecDeque};
use std::time::Instant;

use raptor_model::liveness;
use raptor_model::model::{Action, Effect, State};
use raptor_model::properties::{self, all_answered};
use raptor_model::{Bounds, ClaimProtocol, Mutant};
use stateright::{Checker, HasDiscoveries, Model};

fn safety_names() -> Vec<&'static str> {
    vec![
        properties::AT_MOST_ONCE,
        properties::COMPLETED_ROW_HAS_ITS_EFFECT,
        properties::EFFECT_COMPLETES_ITS_ROW,
        properties::ANSWERS_AGREE,
        properties::ANSWER_IS_TO_THE_REQUEST,
        properties::REPLAY_AUDIT_NAMES_ORIGINAL,
        properties::FAIL_OPEN_ONLY_UNREACHABLE,
    ]
}

/// Every `always` property holds in every reachable state, the `eventually` property on every
/// path that ends, and every `sometimes` scenario is reached (so none holds vacuously); the
/// liveness check finds no trap; and both explorations see the same states.
fn check(bounds: Bounds) {
    let model = ClaimProtocol::new(bounds).with_symmetry();
    let started = Instant::now();
    let checker = model.clone().checker().threads(2).spawn_bfs().join();
    eprintln!(
        "{bounds:?}: {} states ({} generated), depth {}, {:.1?}",
        checker.unique_state_count(),
        checker.state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    checker.assert_properties();
    for name in properties::SOMETIMES {
        assert!(checker.discovery(name).is_some(), "never reached: {name}");
    }
    // The bound is not trivially small.
    assert!(checker.unique_state_count() > 500_000);

    let started = Instant::now();
    let live = liveness::check(&model, all_answered, |a, b, c| !model.adversarial(a, b, c));
    eprintln!(
        "{bounds:?}: liveness: {} states, {} edges, {} goal states, {:.1?}",
        live.states,
        live.edges,
        live.goal_states,
        started.elapsed()
    );
    assert!(live.trap.is_none(), "a trap: {:?}", live.trap.map(|t| t.1));
    assert_eq!(live.states, checker.unique_state_count());
}

#[test]
fn the_protocol_holds_for_two_clients_with_a_budget_of_three() {
    check(Bounds::TESTS[0]);
}

#[test]
fn the_protocol_holds_for_three_clients_with_a_budget_of_two() {
    check(Bounds::TESTS[1]);
}

/// Symmetry reduction loses nothing: the canonical forms of the states of the full exploration
/// are exactly the states of the reduced one.
#[test]
fn symmetry_reduction_is_exact() {
    let explore = |model: &ClaimProtocol| {
        let mut seen: HashSet<State> = model.init_states().into_iter().collect();
        let mut queue: VecDeque<State> = seen.iter().cloned().collect();
        while let Some(state) = queue.pop_front() {
            for next in model.next_states(&state) {
                if seen.insert(next.clone()) {
                    queue.push_back(next);
                }
            }
        }
        seen
    };
    let bounds = Bounds {
        clients: 3,
        faults: 1,
        ..Bounds::MUTANTS
    };
    let full = explore(&ClaimProtocol::new(bounds));
    let reduced = explore(&ClaimProtocol::new(bounds).with_symmetry());
    let canonical: HashSet<State> = full.iter().map(State::canonical).collect();
    eprintln!("{} states, {} up to symmetry", full.len(), reduced.len());
    assert!(reduced.len() < full.len());
    assert_eq!(canonical, reduced);
}

/// Runs a mutant until the first violation and returns the violated properties (the
/// `eventually` one included).
fn violated(mutant: Mutant) -> Vec<&'static str> {
    let model = ClaimProtocol::new(Bounds::MUTANTS).with_mutant(mutant);
    let checker = model
        .checker()
        .threads(2)
        .finish_when(HasDiscoveries::AnyFailures)
        .spawn_bfs()
        .join();
    let found = checker.discoveries();
    safety_names()
        .into_iter()
        .chain([properties::EVERY_CLIENT_ANSWERED])
        .filter(|name| found.contains_key(name))
        .collect()
}

/// The shortest counterexample to `property` under `mutant`.
fn shortest(mutant: Mutant, bounds: Bounds, property: &'static str) -> (Vec<State>, Vec<Action>) {
    let model = ClaimProtocol::new(bounds).with_mutant(mutant);
    let condition = model.property(property).condition;
    liveness::shortest(&model, |s| !condition(&model, s))
        .unwrap_or_else(|| panic!("{mutant:?}: no counterexample to {property}"))
}

#[test]
fn removing_the_fence_is_caught() {
    let found = violated(Mutant::NoFence);
    assert!(
        found.contains(&properties::COMPLETED_ROW_HAS_ITS_EFFECT)
            || found.contains(&properties::EFFECT_COMPLETES_ITS_ROW),
        "{found:?}"
    );
    // Without expiry too: a stale attempt completes the row its successor claimed.
    let no_expiry = Bounds {
        lifetimes: 1,
        ..Bounds::MUTANTS
    };
    let (states, _) = shortest(
        Mutant::NoFence,
        no_expiry,
        properties::EFFECT_COMPLETES_ITS_ROW,
    );
    let last = states.last().expect("a path has a state");
    assert!(last.effects.iter().any(|e| matches!(
        *e,
        Effect::Tracked { token, row: (_, attempt, _), .. } if token != attempt
    )));
}

#[test]
fn select_then_insert_is_caught() {
    let found = violated(Mutant::SelectThenInsert);
    assert!(!found.is_empty());
    let (states, _) = shortest(
        Mutant::SelectThenInsert,
        Bounds::MUTANTS,
        properties::AT_MOST_ONCE,
    );
    let last = states.last().expect("a path has a state");
    assert_eq!(last.effects.len(), 2, "two executions of one lifetime");
}

#[test]
fn failing_open_on_a_busy_pool_is_caught() {
    let found = violated(Mutant::FailOpenOnBusyPool);
    assert_eq!(found, vec![properties::FAIL_OPEN_ONLY_UNREACHABLE]);
}

/// The liveness check is not vacuous: without the stale takeover, a key whose attempt crashed
/// answers 409 for ever, which it finds (stateright's `eventually` cannot: the retries loop).
#[test]
fn no_stale_takeover_is_caught_by_the_liveness_check() {
    let model = ClaimProtocol::new(Bounds::MUTANTS).with_mutant(Mutant::NoStaleTakeover);
    let live = liveness::check(&model, all_answered, |a, b, c| !model.adversarial(a, b, c));
    let (states, actions) = live.trap.expect("a trap");
    let last = states.last().expect("a path has a state");
    assert!(!all_answered(last));
    assert!(actions
        .iter()
        .any(|a| a.transition(model.mutant).name() == "crash"));
    // Its safety properties still hold (this bug only ever says 409), and stateright's
    // `eventually` does not see the livelock: the retries loop, and it judges only paths that
    // end. (If it ever does, docs/idempotency.md's "Properties" should say so.)
    assert!(violated(Mutant::NoStaleTakeover).is_empty());
}
