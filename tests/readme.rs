//! What README.md tells a new user stays true: its code example is
//! `examples/readme.rs` word for word (so it is compiled with the
//! examples), and the commands it names exist.

/// README.md shows `source` (an example's text) below its `//!` header,
/// word for word, as a rust block.
fn assert_shown(file: &str, source: &str) {
    let readme = include_str!("../README.md");
    let example: String = source
        .lines()
        .skip_while(|l| l.starts_with("//!") || l.is_empty())
        .map(|l| format!("{l}\n"))
        .collect();
    let block = format!("```rust\n{example}```");
    assert!(
        readme.contains(&block),
        "README.md's example differs from {file}:\n{example}"
    );
}

#[test]
fn the_readme_example_is_the_compiled_one() {
    assert_shown("examples/readme.rs", include_str!("../examples/readme.rs"));
}

#[test]
fn the_readme_commands_exist() {
    let readme = include_str!("../README.md");
    let root = env!("CARGO_MANIFEST_DIR");
    for script in ["scripts/bench", "scripts/test", "scripts/ensure-redis"] {
        assert!(
            readme.contains(script),
            "README.md no longer names {script}"
        );
        let path = std::path::Path::new(root).join(script);
        let meta = std::fs::metadata(&path).unwrap_or_else(|e| panic!("{script}: {e}"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert!(
                meta.permissions().mode() & 0o111 != 0,
                "{script} is not executable"
            );
        }
        #[cfg(not(unix))]
        let _ = meta;
    }
}
