use std::time::Instant;

use raptor_model::{Bounds, ClaimProtocol, Mutant};
use stateright::{Checker, HasDiscoveries, Model};

#[test]
fn smoke() {
    for bounds in [Bounds::TEST, Bounds{clients:2,bodies:2,lifetimes:2,faults:3}, Bounds{clients:3,bodies:2,lifetimes:2,faults:2}] {
        let started = Instant::now();
        let model = ClaimProtocol::new(bounds);
        let checker = model.clone().checker().threads(2).spawn_bfs().join();
        eprintln!("{bounds:?}: {} unique states, {} total, depth {}, {:?}", checker.unique_state_count(), checker.state_count(), checker.max_depth(), started.elapsed());
        for (name, _) in checker.discoveries() { eprintln!("  discovered: {name}"); }
        let started = Instant::now();
        let live = raptor_model::liveness::check(&model, raptor_model::properties::all_answered, |a, b, c| !model.adversarial(a, b, c));
        eprintln!("  liveness: {} states {} edges trap={} {:?}", live.states, live.edges, live.trap.is_some(), started.elapsed());
        if let Some((states, actions)) = live.trap {
            eprintln!("{}", raptor_model::trace::describe(&model, &states, &actions));
        }
    }
    for mutant in [Mutant::NoFence, Mutant::SelectThenInsert, Mutant::FailOpenOnBusyPool, Mutant::NoStaleTakeover] {
        let started = Instant::now();
        let model = ClaimProtocol::new(Bounds::TEST).with_mutant(mutant);
        let checker = model.clone().checker().threads(2).finish_when(HasDiscoveries::AnyFailures).spawn_bfs().join();
        eprintln!("{mutant:?}: {} unique states, {:?}", checker.unique_state_count(), started.elapsed());
        for (name, _) in checker.discoveries() {
            if raptor_model::properties::SOMETIMES.contains(&name) { continue; }
            eprintln!("  discovered: {name}");
            let p = model.property(name);
            let (states, actions) = raptor_model::liveness::shortest(&model, |s| !(p.condition)(&model, s)).unwrap();
            eprintln!("{}", raptor_model::trace::describe(&model, &states, &actions));
        }
        if mutant == Mutant::NoStaleTakeover {
        let started = Instant::now();
        let live = raptor_model::liveness::check(&model, raptor_model::properties::all_answered, |a, b, c| !model.adversarial(a, b, c));
        eprintln!("  liveness: {} states {} edges trap={} {:?}", live.states, live.edges, live.trap.is_some(), started.elapsed());
        if let Some((states, actions)) = live.trap {
            eprintln!("{}", raptor_model::trace::describe(&model, &states, &actions));
        }
        }
    }
}
