//! Prints the states explored and the time of every check the tests run.

use deadbolt_model::{check, no_lost_wakeup, Config, GrantModel, Primitive};

fn main() {
    for p in [Primitive::Lock, Primitive::Fair, Primitive::Semaphore(2)] {
        let r = check(Config::safety(p));
        println!(
            "{p:?} safety: {} states ({} unique, depth {}) in {:.1?}; discoveries {:?}",
            r.states, r.unique, r.depth, r.elapsed, r.discoveries
        );
        let t = std::time::Instant::now();
        let l = no_lost_wakeup(&GrantModel::new(Config::liveness(p)));
        println!(
            "{p:?} no lost wake-up: {} states ({} free with a waiter), {} edges in {:.1?}; {}",
            l.states,
            l.checked,
            l.edges,
            t.elapsed(),
            if l.counterexample.is_some() {
                "VIOLATED"
            } else {
                "holds"
            }
        );
    }
}
