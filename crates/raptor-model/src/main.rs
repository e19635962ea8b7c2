//! `make model`: checks the claim protocol at a bound (by default the larger one), prints the
//! state counts, each property's verdict and, for a violation, the shortest counterexample.
//! Exits 1 when a property is violated.

use std::process::ExitCode;
use std::time::Instant;

use raptor_model::model::State;
use raptor_model::properties::{self, all_answered, SOMETIMES};
use raptor_model::{liveness, trace, Bounds, ClaimProtocol, Mutant, Tier};
use stateright::{Checker, Expectation, Model};

const USAGE: &str = "usage: raptor-model [--clients N] [--bodies N] [--lifetimes N] [--faults N]
                    [--tier 1|2] [--threads N] [--no-liveness] [--no-symmetry]
                    [--mutant no-fence|select-then-insert|fail-open-on-busy-pool|no-stale-takeover]
Defaults: the larger bound of `make model` (Bounds::LARGE), both tiers, every core, symmetry
reduction (clients are interchangeable; traces are printed without it).";

struct Options {
    model: ClaimProtocol,
    threads: usize,
    liveness: bool,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut bounds = Bounds::LARGE;
    let mut model = ClaimProtocol::new(bounds).with_symmetry();
    let mut threads = std::thread::available_parallelism().map_or(1, usize::from);
    let mut liveness = true;
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        let number = |text: String| {
            text.parse::<u8>()
                .map_err(|_| format!("{flag}: not a small number: {text}"))
        };
        match flag.as_str() {
            "--clients" => bounds.clients = number(value()?)?,
            "--bodies" => bounds.bodies = number(value()?)?,
            "--lifetimes" => bounds.lifetimes = number(value()?)?,
            "--faults" => bounds.faults = number(value()?)?,
            "--threads" => threads = usize::from(number(value()?)?.max(1)),
            "--no-liveness" => liveness = false,
            "--no-symmetry" => model.symmetry = false,
            "--tier" => {
                model.tiers = match value()?.as_str() {
                    "1" => vec![Tier::FailClosed],
                    "2" => vec![Tier::FailOpen],
                    other => return Err(format!("--tier: 1 or 2, not {other}")),
                }
            }
            "--mutant" => {
                model.mutant = Some(match value()?.as_str() {
                    "no-fence" => Mutant::NoFence,
                    "select-then-insert" => Mutant::SelectThenInsert,
                    "fail-open-on-busy-pool" => Mutant::FailOpenOnBusyPool,
                    "no-stale-takeover" => Mutant::NoStaleTakeover,
                    other => return Err(format!("--mutant: unknown {other}")),
                })
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if bounds.clients == 0 || bounds.bodies == 0 || bounds.lifetimes == 0 || bounds.clients > 8 {
        return Err(String::from(
            "clients (1-8), bodies and lifetimes must be at least 1",
        ));
    }
    model.bounds = bounds;
    Ok(Options {
        model,
        threads,
        liveness,
    })
}

fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The shortest path to a state where `bad` holds, explored without symmetry reduction so that
/// the clients keep their numbers along the trace.
fn print_trace(model: &ClaimProtocol, bad: impl Fn(&State) -> bool) {
    let model = ClaimProtocol {
        symmetry: false,
        ..model.clone()
    };
    match liveness::shortest(&model, bad) {
        Some((states, actions)) => print!("{}", trace::describe(&model, &states, &actions)),
        None => println!("    (no shortest path found)"),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match parse(&args) {
        Ok(options) => options,
        Err(why) => {
            if !why.is_empty() {
                eprintln!("raptor-model: {why}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let model = options.model;
    let b = model.bounds;
    println!(
        "bounds: {} clients, {} bodies, {} lifetimes, adversary budget {}; tiers {:?}; symmetry {}; mutant {}",
        b.clients,
        b.bodies,
        b.lifetimes,
        b.faults,
        model.tiers,
        if model.symmetry { "on" } else { "off" },
        model.mutant.map_or_else(|| String::from("none"), |m| format!("{m:?}"))
    );

    let started = Instant::now();
    let checker = model
        .clone()
        .checker()
        .threads(options.threads)
        .spawn_bfs()
        .join();
    println!(
        "safety (stateright, breadth first, {} threads): {} states ({} generated), depth {}, {:.1?}",
        options.threads,
        thousands(checker.unique_state_count()),
        thousands(checker.state_count()),
        checker.max_depth(),
        started.elapsed()
    );
    let mut failed = false;
    for property in model.properties() {
        let found = checker.discovery(property.name).is_some();
        let verdict = match (&property.expectation, found) {
            (Expectation::Sometimes, true) => "reached",
            (Expectation::Sometimes, false) => "NOT REACHED",
            (_, false) => "holds",
            (_, true) => "VIOLATED",
        };
        println!("  {verdict:<11} {}", property.name);
        if verdict == "VIOLATED" {
            failed = true;
            if property.expectation == Expectation::Always {
                println!("    shortest counterexample:");
                print_trace(&model, |s| !(property.condition)(&model, s));
            }
        }
    }
    let unreached = SOMETIMES
        .iter()
        .filter(|name| checker.discovery(name).is_none())
        .count();
    if unreached > 0 {
        println!("  ({unreached} scenario(s) not reached: the bound may be too small for them)");
    }

    if options.liveness {
        let started = Instant::now();
        let (mut attempts, mut executions) = (0, 0);
        let live = liveness::check_observing(
            &model,
            all_answered,
            |a, b, c| !model.adversarial(a, b, c),
            |s| {
                attempts = attempts.max(s.attempts.len());
                executions = executions.max(s.next_token);
            },
        );
        let verdict = if live.trap.is_some() {
            "A TRAP"
        } else {
            "no trap"
        };
        println!(
            "liveness (explicit graph, fair steps only): {} states, {} edges, {} goal states, {:.1?}: {verdict}",
            thousands(live.states),
            thousands(live.edges),
            thousands(live.goal_states),
            started.elapsed()
        );
        println!(
            "  up to {attempts} server attempts at once, up to {executions} executions (claims won or failed open)"
        );
        println!("  {}", properties::EVERY_CLIENT_ANSWERED);
        if let Some((_, actions)) = live.trap {
            failed = true;
            println!(
                "    a path ({} steps) into a state from which no fair schedule answers every client:",
                actions.len()
            );
            let trap = liveness::check(
                &ClaimProtocol {
                    symmetry: false,
                    ..model.clone()
                },
                all_answered,
                |a, b, c| !model.adversarial(a, b, c),
            );
            if let Some((states, actions)) = trap.trap {
                print!("{}", trace::describe(&model, &states, &actions));
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
