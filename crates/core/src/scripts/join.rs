//! Joining a script with what it uses of its libraries: each library is
//! read as a list of top-level definitions, and a script carries only
//! those its own text names, directly or through another kept one (Redis
//! creates every `local` of a script's text at each call).

/// One top-level definition of a library: `local function NAME(...)` at
/// column 0 through the next line that is `end` at column 0, or a one-line
/// `local NAME = ...`, with the comment lines right above it.
#[derive(Debug, PartialEq)]
pub(super) struct Definition<'a> {
    pub(super) name: &'a str,
    pub(super) text: &'a str,
}

/// The definitions of library `lib`, in order; or the 1-based number of
/// the first line that is none of: a definition (as [`Definition`]), a
/// comment or blank line between definitions. Libraries keep this layout
/// ([`check_header`](super::check_header) asserts it for every script's libraries); one that does
/// not is joined whole by [`join`].
pub(super) fn definitions(lib: &str) -> Result<Vec<Definition<'_>>, usize> {
    let mut out = Vec::new();
    // Byte offset of the comment run right above the current line, if any.
    let mut comments: Option<usize> = None;
    let mut open: Option<(&str, usize)> = None;
    let mut at = 0;
    for (i, line) in lib.split_inclusive('\n').enumerate() {
        let start = at;
        at += line.len();
        let code = line.trim_end_matches(['\n', '\r']);
        if let Some((name, from)) = open {
            if code == "end" {
                out.push(Definition {
                    name,
                    text: lib[from..start + code.len()].trim_end(),
                });
                open = None;
            }
            continue;
        }
        if let Some(name) = defined(code, "local function ") {
            open = Some((name, comments.take().unwrap_or(start)));
        } else if let Some(name) = defined(code, "local ") {
            if !code[6 + name.len()..].trim_start().starts_with('=') {
                return Err(i + 1);
            }
            let from = comments.take().unwrap_or(start);
            out.push(Definition {
                name,
                text: &lib[from..start + code.len()],
            });
        } else if code.starts_with("--") {
            comments.get_or_insert(start);
        } else if code.trim().is_empty() {
            comments = None;
        } else {
            return Err(i + 1);
        }
    }
    match open {
        Some(_) => Err(lib.lines().count()),
        None => Ok(out),
    }
}

/// The name `line` defines after `prefix` (`local function ` or `local `),
/// when it starts with that prefix at column 0.
fn defined<'a>(line: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(prefix)?;
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    let name = &rest[..end];
    (!name.is_empty() && !name.starts_with(|c: char| c.is_ascii_digit())).then_some(name)
}

/// Every identifier of Lua `code` outside comments and string literals
/// (keywords included: no definition is named after one).
fn identifiers(code: &str) -> impl Iterator<Item = &str> {
    let bytes = code.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < bytes.len() {
            let c = bytes[i];
            if bytes[i..].starts_with(b"--") {
                i = code[i..].find('\n').map_or(bytes.len(), |n| i + n);
            } else if c == b'\'' || c == b'"' {
                i += 1;
                while i < bytes.len() && bytes[i] != c {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            } else if c.is_ascii_alphabetic() || c == b'_' {
                let from = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                return Some(&code[from..i]);
            } else if c.is_ascii_digit() {
                // A number (also its hex digits and exponent): not a name.
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
            } else {
                i += 1;
            }
        }
        None
    })
}

/// The text a script runs: `body` after the definitions of `libs` it uses.
///
/// Every `local` of a script's text is created at every call (Redis runs a
/// script's text as a function body), so a script that carried every
/// library whole paid for the closures of functions it never calls: about
/// 1–2 µs per call for scripts joined after four libraries (redis 7.0).
/// So each library gives only its [`definitions`] that the body names, or
/// that a definition kept for it names, transitively (a name in a comment
/// or a string literal does not count), in the libraries' order, each with
/// the comment above it and ended by a newline. A library whose layout
/// `definitions` refuses is kept whole. The result depends on the texts
/// alone, so a script's SHA is stable.
pub(super) fn join(libs: &[&str], body: &str) -> String {
    let parsed: Vec<Result<Vec<Definition<'_>>, usize>> =
        libs.iter().map(|lib| definitions(lib)).collect();
    let mut wanted: std::collections::HashSet<&str> = identifiers(body).collect();
    for (lib, defs) in libs.iter().zip(&parsed) {
        if defs.is_err() {
            wanted.extend(identifiers(lib));
        }
    }
    // Walked from the last definition back: a definition can use only those
    // above it (a later `local` is not in its scope).
    let mut kept = vec![Vec::new(); libs.len()];
    for (l, defs) in parsed.iter().enumerate().rev() {
        let Ok(defs) = defs else { continue };
        for (d, def) in defs.iter().enumerate().rev() {
            if wanted.contains(def.name) {
                wanted.extend(identifiers(def.text));
                kept[l].push(d);
            }
        }
    }
    let mut text = String::new();
    for ((lib, defs), kept) in libs.iter().zip(&parsed).zip(&kept) {
        match defs {
            Ok(defs) => {
                for &d in kept.iter().rev() {
                    text.push_str(defs[d].text);
                    text.push('\n');
                }
            }
            Err(_) => {
                text.push_str(lib);
                text.push('\n');
            }
        }
    }
    text.push_str(body);
    text
}
