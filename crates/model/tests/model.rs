//! The model checked: every primitive passes every property, and each
//! mutation is caught by a named property.

use deadbolt_model::{
    check, no_lost_wakeup, Config, GrantModel, Mutation, Primitive, GRANT_TAKEN_ONCE,
    HOLDERS_MATCH_SERVER, MUTUAL_EXCLUSION, TOKENS_RISE,
};

const SOMETIMES_HELD: &str = deadbolt_model::props::SOMETIMES_HELD;

fn passes(primitive: Primitive) {
    let run = check(Config::safety(primitive));
    println!("{primitive:?} safety: {run:?}");
    assert_eq!(run.discoveries, vec![SOMETIMES_HELD], "{primitive:?}");
    let live = no_lost_wakeup(&GrantModel::new(Config::liveness(primitive)));
    println!(
        "{primitive:?} no lost wake-up: {} states, {} checked",
        live.states, live.checked
    );
    assert!(live.checked > 100, "{primitive:?}: too few states to check");
    assert!(live.counterexample.is_none(), "{:#?}", live.counterexample);
}

#[test]
fn the_lock_keeps_every_property() {
    passes(Primitive::Lock);
}

#[test]
fn the_fair_lock_keeps_every_property() {
    passes(Primitive::Fair);
}

#[test]
fn the_semaphore_keeps_every_property() {
    passes(Primitive::Semaphore(2));
}

/// Three clients with one waiter each, the second at a replica: the
/// release before d5b954d takes back the grant it published to the
/// second (PUBLISH counted nobody) and grants the third with the same
/// token; both take it.
#[test]
fn passing_over_an_unheard_grant_is_caught() {
    let config = Config {
        clients: 3,
        rounds: 1,
        faults: 0,
        time: false,
        crashes: false,
        cancels: false,
        force_unlock: false,
        ..Config::safety(Primitive::Lock)
    }
    .with(Mutation::PassOverUnheard);
    let run = check(config.clone());
    println!("{run:?}");
    for p in [
        GRANT_TAKEN_ONCE,
        MUTUAL_EXCLUSION,
        TOKENS_RISE,
        HOLDERS_MATCH_SERVER,
    ] {
        assert!(run.discoveries.contains(&p), "{p} not caught: {run:?}");
    }
    let mut fixed = config;
    fixed.mutation = Mutation::None;
    assert_eq!(check(fixed).discoveries, vec![SOMETIMES_HELD]);
}

#[test]
fn a_release_that_forgets_to_publish_is_caught() {
    for p in [Primitive::Lock, Primitive::Fair, Primitive::Semaphore(2)] {
        let model = GrantModel::new(Config::liveness(p).with(Mutation::ReleaseForgetsToPublish));
        let live = no_lost_wakeup(&model);
        assert!(
            live.counterexample.is_some(),
            "{p:?}: no lost wake-up not caught"
        );
        // The safety properties do not see it: the bug only delays.
        let run = check(Config::safety(p).with(Mutation::ReleaseForgetsToPublish));
        assert_eq!(run.discoveries, vec![SOMETIMES_HELD], "{p:?}");
    }
}
