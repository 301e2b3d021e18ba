//! The properties: four invariants checked by stateright, and the
//! no-lost-wake-up check, a reachability check over the explored graph.

use std::collections::{HashMap, VecDeque};

use stateright::{Model, Property};

use crate::config::Primitive;
use crate::model::{Action, GrantModel};
use crate::state::{Phase, Server, State};

/// At most one waiter holds a Lock or FairLock, at most N a Semaphore of
/// N permits, and the server records at most N permit holds.
pub const MUTUAL_EXCLUSION: &str = "mutual exclusion";
/// Fencing tokens taken by waiters strictly rise.
pub const TOKENS_RISE: &str = "fencing tokens rise";
/// A waiter believes it holds only what the server recorded for it.
pub const HOLDERS_MATCH_SERVER: &str = "holders match server";
/// No grant (no token) is taken by two waiters.
pub const GRANT_TAKEN_ONCE: &str = "grant taken once";
/// Sanity: some waiter does come to hold.
pub const SOMETIMES_HELD: &str = "sometimes held";
/// The no-lost-wake-up check's name (see [`no_lost_wakeup`]).
pub const NO_LOST_WAKEUP: &str = "no lost wake-up";

/// The waiters that believe they hold, with their token (force-unlocked
/// ones left out: force-unlock ends a hold by design).
fn believers(s: &State) -> impl Iterator<Item = (usize, u32)> + '_ {
    s.waiters
        .iter()
        .enumerate()
        .filter_map(|(w, x)| match x.phase {
            Phase::Holding {
                token,
                forced: false,
            } => Some((w, token)),
            _ => None,
        })
}

fn limit(m: &GrantModel) -> usize {
    match m.config.primitive {
        Primitive::Semaphore(n) => usize::from(n),
        _ => 1,
    }
}

fn mutual_exclusion(m: &GrantModel, s: &State) -> bool {
    let recorded = match &s.server {
        Server::Sem(k) => k.holds.len(),
        _ => 0,
    };
    believers(s).count() <= limit(m) && recorded <= limit(m)
}

fn tokens_rise(_: &GrantModel, s: &State) -> bool {
    !s.token_repeat
}

fn holders_match_server(_: &GrantModel, s: &State) -> bool {
    believers(s).all(|(w, token)| {
        let x = &s.waiters[w];
        let a = crate::Attempt {
            waiter: u8::try_from(w).unwrap_or(u8::MAX),
            round: x.round,
        };
        match &s.server {
            Server::Lock(k) => k
                .hold
                .as_ref()
                .is_some_and(|h| h.attempt == a && h.token == token),
            Server::Fair(k) => k
                .hold
                .as_ref()
                .is_some_and(|h| h.attempt == a && h.token == token),
            Server::Sem(k) => k.holds.iter().any(|h| h.attempt == a),
        }
    })
}

fn grant_taken_once(m: &GrantModel, s: &State) -> bool {
    if let Primitive::Semaphore(_) = m.config.primitive {
        return true;
    }
    let mut tokens: Vec<u32> = believers(s).map(|(_, t)| t).collect();
    let n = tokens.len();
    tokens.sort_unstable();
    tokens.dedup();
    tokens.len() == n
}

fn sometimes_held(_: &GrantModel, s: &State) -> bool {
    believers(s).next().is_some()
}

/// The properties stateright checks.
pub(crate) fn properties() -> Vec<Property<GrantModel>> {
    vec![
        Property::always(MUTUAL_EXCLUSION, mutual_exclusion),
        Property::always(TOKENS_RISE, tokens_rise),
        Property::always(HOLDERS_MATCH_SERVER, holders_match_server),
        Property::always(GRANT_TAKEN_ONCE, grant_taken_once),
        Property::sometimes(SOMETIMES_HELD, sometimes_held),
    ]
}

/// A live waiter is in an acquire and nobody holds (believes it holds).
fn stalled_candidate(s: &State) -> bool {
    believers(s).next().is_none() && s.waiters.iter().any(|x| x.phase.waiting())
}

/// What [`no_lost_wakeup`] found.
#[derive(Debug)]
pub struct LivenessReport {
    /// Reachable states explored.
    pub states: usize,
    /// Transitions explored.
    pub edges: usize,
    /// States where nobody holds and a live waiter waits (each checked).
    pub checked: usize,
    /// A path from the initial state (each state with the step that led
    /// to it) to a state where nobody holds and a live waiter waits, from
    /// which no prompt path leads to a holder.
    pub counterexample: Option<Vec<(Option<Action>, State)>>,
}

/// The no-lost-wake-up check, bounded: explores every reachable state of
/// `model` (all steps, timers included), then asks, of every state where
/// nobody holds and a live waiter waits, whether a state where some
/// waiter holds is reachable by prompt steps alone ([`Action::prompt`]:
/// no timer firing, no time passing, no fault). Meant for a configuration
/// without faults or time ([`crate::Config::liveness`]): there a waiter
/// must be woken by a message, a reply or a local hand-off, never left
/// to its timer.
pub fn no_lost_wakeup(model: &GrantModel) -> LivenessReport {
    let mut index: HashMap<State, usize> = HashMap::new();
    let mut states: Vec<State> = Vec::new();
    let mut parent: Vec<Option<(usize, Action)>> = Vec::new();
    let mut back: Vec<Vec<usize>> = Vec::new();
    let mut queue = VecDeque::new();
    let mut edges = 0;
    for s in model.init_states() {
        index.insert(s.clone(), states.len());
        queue.push_back(states.len());
        states.push(s);
        parent.push(None);
        back.push(Vec::new());
    }
    let mut actions = Vec::new();
    while let Some(i) = queue.pop_front() {
        actions.clear();
        model.actions(&states[i], &mut actions);
        for &a in &actions {
            let Some(next) = model.next_state(&states[i], a) else {
                continue;
            };
            if !model.within_boundary(&next) {
                continue;
            }
            edges += 1;
            let j = match index.get(&next) {
                Some(&j) => j,
                None => {
                    let j = states.len();
                    index.insert(next.clone(), j);
                    states.push(next);
                    parent.push(Some((i, a)));
                    back.push(Vec::new());
                    queue.push_back(j);
                    j
                }
            };
            if a.prompt() {
                back[j].push(i);
            }
        }
    }
    // Backwards from every state with a holder, over prompt steps.
    let mut good = vec![false; states.len()];
    let mut todo: Vec<usize> = (0..states.len())
        .filter(|&i| believers(&states[i]).next().is_some())
        .collect();
    for &i in &todo {
        good[i] = true;
    }
    while let Some(j) = todo.pop() {
        for &i in &back[j] {
            if !good[i] {
                good[i] = true;
                todo.push(i);
            }
        }
    }
    let checked = states.iter().filter(|s| stalled_candidate(s)).count();
    let bad = (0..states.len()).find(|&i| !good[i] && stalled_candidate(&states[i]));
    let counterexample = bad.map(|mut i| {
        let mut path = Vec::new();
        while let Some((p, a)) = parent[i] {
            path.push((Some(a), states[i].clone()));
            i = p;
        }
        path.push((None, states[i].clone()));
        path.reverse();
        path
    });
    LivenessReport {
        states: states.len(),
        edges,
        checked,
        counterexample,
    }
}
