//! The model names, for every transition, the functions of the service's crates (`crates/`)
//! that perform it (`raptor_model::code`, the one table). These tests fail when one of those
//! functions is renamed or removed, when the model takes a step the table does not know, and
//! when `docs/idempotency.md` does not describe a transition.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;

use raptor_model::code::{functions_in, Kind, Transition};
use raptor_model::{Bounds, ClaimProtocol, Mutant};
use stateright::Model;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn every_named_function_exists() {
    let src = repo().join("crates");
    let mut files: HashMap<&str, Vec<String>> = HashMap::new();
    let mut missing = Vec::new();
    for transition in Transition::ALL {
        if transition.kind() == Kind::Protocol {
            assert!(
                !transition.code().is_empty(),
                "{transition:?} names no code"
            );
        }
        for at in transition.code() {
            let functions = files.entry(at.file).or_insert_with(|| {
                let path = src.join(at.file);
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
                functions_in(&text)
            });
            if !functions.iter().any(|f| f == at.path) {
                missing.push(format!(
                    "{} ({}): {}::{}",
                    transition.name(),
                    transition.sql(),
                    at.file,
                    at.path
                ));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "functions the model names are gone (renamed or moved? update crates/raptor-model/src/code.rs):\n{}",
        missing.join("\n")
    );
}

#[test]
fn transition_names_are_unique() {
    let names: HashSet<&str> = Transition::ALL.iter().map(|t| t.name()).collect();
    assert_eq!(names.len(), Transition::ALL.len());
}

/// Every transition in the table is taken somewhere in the model (with the mutant for the
/// mutant's own steps), and every step the model takes is in the table.
#[test]
fn the_table_and_the_model_agree() {
    let small = Bounds {
        faults: 1,
        ..Bounds::MUTANTS
    };
    let mut taken = HashSet::new();
    for model in [
        ClaimProtocol::new(Bounds::MUTANTS),
        ClaimProtocol::new(small).with_mutant(Mutant::SelectThenInsert),
    ] {
        let mut seen = HashSet::new();
        let mut queue: VecDeque<_> = model.init_states().into();
        while let Some(state) = queue.pop_front() {
            for (action, next) in model.next_steps(&state) {
                taken.insert(action.transition(model.mutant));
                if seen.insert(next.clone()) {
                    queue.push_back(next);
                }
            }
        }
    }
    for transition in Transition::ALL {
        assert!(
            taken.contains(&transition),
            "never taken: {}",
            transition.name()
        );
    }
    for transition in &taken {
        assert!(
            Transition::ALL.contains(transition),
            "not in the table: {transition:?}"
        );
    }
}

/// `docs/idempotency.md` names every transition of the model.
#[test]
fn the_docs_name_every_transition() {
    let docs =
        std::fs::read_to_string(repo().join("docs/idempotency.md")).expect("docs/idempotency.md");
    let section = docs
        .split("\n## ")
        .find(|s| s.starts_with("The model"))
        .expect("docs/idempotency.md has a section \"The model …\"");
    for transition in Transition::ALL {
        assert!(
            section.contains(&format!("`{}`", transition.name())),
            "docs/idempotency.md, \"The model\": `{}` is not described",
            transition.name()
        );
    }
}
