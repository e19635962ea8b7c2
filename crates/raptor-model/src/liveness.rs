//! Liveness under fairness, checked on the explicit state graph.
//!
//! stateright's `eventually` properties are only judged on paths that end in a state with no
//! successor: a path that loops (a client retrying into `409 idempotency_in_flight` for ever)
//! is never reported. This check covers loops: it builds the whole reachable graph and asks,
//! for every reachable state (reached by any steps, the adversary's included), whether a goal
//! state is still reachable from it by fair steps alone: the protocol's own steps, the
//! clients' retries of the same request, time passing for an attempt that is gone; not a
//! fault, a changed body or an expiry (`AG EF goal` over those steps). On a finite graph that
//! means: every run whose faults stop, and in which a fair step that is possible infinitely
//! often is taken infinitely often (strong fairness, per state: the scheduler cannot starve an
//! attempt for ever; a randomized scheduler does this with probability 1), reaches the goal.
//! A state from which no goal is reachable that way is a trap: once the faults stop, no
//! schedule gets out of it.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};

use stateright::Model;

/// A path: its states (the first an initial state) and the actions between them.
pub type Trace<S, A> = (Vec<S>, Vec<A>);

/// What the check found.
#[derive(Debug)]
pub struct Liveness<S, A> {
    /// Reachable states.
    pub states: usize,
    /// Transitions between them.
    pub edges: usize,
    /// States that satisfy the goal.
    pub goal_states: usize,
    /// The shortest path (from an initial state) into a state from which the goal is
    /// unreachable, if there is one: its actions and the states they lead to.
    pub trap: Option<Trace<S, A>>,
}

fn fingerprint<S: Hash>(state: &S) -> u64 {
    let mut hasher = DefaultHasher::new();
    state.hash(&mut hasher);
    hasher.finish()
}

const ROOT: u32 = u32::MAX;

/// Explores every reachable state of `model` and checks that `goal` stays reachable from each
/// by the steps that `fair(before, action, after)` accepts.
pub fn check<M>(
    model: &M,
    goal: fn(&M::State) -> bool,
    fair: impl Fn(&M::State, &M::Action, &M::State) -> bool,
) -> Liveness<M::State, M::Action>
where
    M: Model,
    M::State: Hash + Clone,
    M::Action: Clone,
{
    check_observing(model, goal, fair, |_| {})
}

/// [`check`], showing every reachable state once to `observe`.
pub fn check_observing<M>(
    model: &M,
    goal: fn(&M::State) -> bool,
    fair: impl Fn(&M::State, &M::Action, &M::State) -> bool,
    mut observe: impl FnMut(&M::State),
) -> Liveness<M::State, M::Action>
where
    M: Model,
    M::State: Hash + Clone,
    M::Action: Clone,
{
    // State ids by fingerprint; for each id, how it was first reached (to rebuild a path).
    let mut ids: HashMap<u64, u32> = HashMap::new();
    let mut parent: Vec<(u32, Option<M::Action>)> = Vec::new();
    let mut is_goal: Vec<bool> = Vec::new();
    // The fair edges (the backwards search follows only them), and how many there are in all.
    let mut edges: Vec<(u32, u32)> = Vec::new();
    let mut all_edges = 0usize;
    let mut queue: VecDeque<(u32, M::State)> = VecDeque::new();

    let mut visit = |state: M::State,
                     from: u32,
                     action: Option<M::Action>,
                     ids: &mut HashMap<u64, u32>,
                     queue: &mut VecDeque<(u32, M::State)>|
     -> u32 {
        let fp = fingerprint(&state);
        if let Some(&id) = ids.get(&fp) {
            return id;
        }
        let id = u32::try_from(parent.len()).unwrap_or(ROOT - 1);
        ids.insert(fp, id);
        parent.push((from, action));
        is_goal.push(goal(&state));
        queue.push_back((id, state));
        id
    };

    for state in model.init_states() {
        visit(state, ROOT, None, &mut ids, &mut queue);
    }
    while let Some((id, state)) = queue.pop_front() {
        observe(&state);
        for (action, next) in model.next_steps(&state) {
            let is_fair = fair(&state, &action, &next);
            let to = visit(next, id, Some(action), &mut ids, &mut queue);
            all_edges += 1;
            if is_fair {
                edges.push((id, to));
            }
        }
    }

    // Backwards from the goal states: which states can still reach one.
    let count = parent.len();
    let mut preds_start = vec![0u32; count + 1];
    for &(_, to) in &edges {
        preds_start[to as usize + 1] += 1;
    }
    for i in 0..count {
        preds_start[i + 1] += preds_start[i];
    }
    let mut fill = preds_start.clone();
    let mut preds = vec![0u32; edges.len()];
    for &(from, to) in &edges {
        preds[fill[to as usize] as usize] = from;
        fill[to as usize] += 1;
    }
    let mut live = is_goal.clone();
    let mut stack: Vec<u32> = (0..count)
        .filter(|&i| is_goal[i])
        .map(|i| u32::try_from(i).unwrap_or(ROOT - 1))
        .collect();
    while let Some(to) = stack.pop() {
        let (lo, hi) = (
            preds_start[to as usize] as usize,
            preds_start[to as usize + 1] as usize,
        );
        for &from in &preds[lo..hi] {
            if !live[from as usize] {
                live[from as usize] = true;
                stack.push(from);
            }
        }
    }

    // Ids are in BFS order: the first dead one is a nearest trap.
    let trap = live.iter().position(|alive| !alive).map(|dead| {
        let mut actions = Vec::new();
        let mut at = dead;
        while let (from, Some(action)) = &parent[at] {
            actions.push(action.clone());
            at = *from as usize;
        }
        // `at` is an initial state: the first ids are the initial states, in order.
        let init = at;
        actions.reverse();
        replay(model, init, actions)
    });

    Liveness {
        states: count,
        edges: all_edges,
        goal_states: is_goal.iter().filter(|g| **g).count(),
        trap,
    }
}

/// The states of a path, rebuilt from its initial state's index and its actions.
fn replay<M>(model: &M, init: usize, actions: Vec<M::Action>) -> Trace<M::State, M::Action>
where
    M: Model,
    M::State: Clone,
    M::Action: Clone,
{
    let mut states = Vec::new();
    if let Some(first) = model.init_states().into_iter().nth(init) {
        states.push(first);
    }
    for action in &actions {
        let Some(last) = states.last() else { break };
        let Some(next) = model.next_state(last, action.clone()) else {
            break;
        };
        states.push(next);
    }
    (states, actions)
}

/// The shortest path (breadth first, one thread) from an initial state to a state where `bad`
/// holds: the counterexample to show people (stateright's own paths need not be shortest).
pub fn shortest<M>(model: &M, bad: impl Fn(&M::State) -> bool) -> Option<Trace<M::State, M::Action>>
where
    M: Model,
    M::State: Hash + Clone,
    M::Action: Clone,
{
    let mut ids: HashMap<u64, usize> = HashMap::new();
    let mut parent: Vec<(usize, Option<M::Action>)> = Vec::new();
    let mut queue: VecDeque<(usize, M::State)> = VecDeque::new();
    let path_to = |parent: &[(usize, Option<M::Action>)], mut at: usize| {
        let mut actions = Vec::new();
        while let (from, Some(action)) = &parent[at] {
            actions.push(action.clone());
            at = *from;
        }
        actions.reverse();
        replay(model, at, actions)
    };
    for state in model.init_states() {
        let id = parent.len();
        if bad(&state) {
            return Some((vec![state], Vec::new()));
        }
        ids.insert(fingerprint(&state), id);
        parent.push((usize::MAX, None));
        queue.push_back((id, state));
    }
    while let Some((id, state)) = queue.pop_front() {
        for (action, next) in model.next_steps(&state) {
            let fp = fingerprint(&next);
            if ids.contains_key(&fp) {
                continue;
            }
            let next_id = parent.len();
            ids.insert(fp, next_id);
            parent.push((id, Some(action)));
            if bad(&next) {
                return Some(path_to(&parent, next_id));
            }
            queue.push_back((next_id, next));
        }
    }
    None
}
