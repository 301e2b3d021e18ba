//! Every protocol script of the Lock, the FairLock and the Semaphore has a
//! step in the model, read from the script directories at test time: a new
//! script fails this test until it is modelled or excluded with a reason.

use std::path::Path;

use deadbolt_model::modelled_scripts;

/// Scripts that are no protocol step, each with why.
const EXCLUDED: &[(&str, &str)] = &[
    (
        "fair_lib",
        "a library joined before the fair scripts, no script of its own",
    ),
    (
        "fair_queue",
        "read-only: lists the queue for `deadbolt inspect`",
    ),
    ("sem_lib", "a library joined before the semaphore scripts"),
    (
        "sem_inspect",
        "read-only apart from the purge every sem script makes",
    ),
    (
        "sem_permits",
        "sets the permit total: the model's total is fixed",
    ),
    (
        "sem_delete",
        "an operator's delete of the whole semaphore, as force-unlock",
    ),
    (
        "sem_release_part",
        "partial release: every modelled hold has one permit",
    ),
    (
        "latch_lib",
        "the count-down latch's library, not the grant protocol",
    ),
    ("latch_op", "the count-down latch, not the grant protocol"),
    ("latch_wait", "the count-down latch, not the grant protocol"),
];

#[test]
fn every_protocol_script_has_a_step() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let modelled = modelled_scripts();
    let mut missing = Vec::new();
    let mut seen = 0;
    for dir in ["lock/lua", "fair/lua", "semaphore/lua"] {
        for f in std::fs::read_dir(root.join(dir)).expect("the scripts' directory") {
            let path = f.expect("a directory entry").path();
            if path.extension().is_none_or(|e| e != "lua") {
                continue;
            }
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_string();
            seen += 1;
            if EXCLUDED.iter().any(|(e, _)| *e == name) {
                continue;
            }
            if !modelled.contains(&name.as_str()) {
                missing.push(name);
            }
        }
    }
    assert!(seen > 10, "found only {seen} scripts");
    assert!(
        missing.is_empty(),
        "scripts without a step in the model: {missing:?}"
    );
    // hold_renew is core's, renewing every exclusive hold.
    assert!(modelled.contains(&"hold_renew"));
}

#[test]
fn every_exclusion_names_a_script_that_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for (name, _) in EXCLUDED {
        let found = ["lock/lua", "fair/lua", "semaphore/lua"]
            .iter()
            .any(|d| root.join(d).join(format!("{name}.lua")).exists());
        assert!(found, "{name}.lua is excluded but does not exist");
    }
}
