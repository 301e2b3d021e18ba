//! Minimal incremental RESP2/RESP3 frame splitter used by the fault proxy.
//!
//! It does not decode values; it only finds where complete top-level frames end so the
//! proxy can pair replies with requests and withhold whole replies.
//!
//! Why not the `redis-protocol` crate's decoder (checked at 6.0.0, its newest release, of
//! 2024-11): it decodes, where the proxy must only split, and its decoding does not fit.
//! - Its RESP3 decoder reads a length of `-1` as the `?` of a streamed type, so the RESP2 nulls
//!   `$-1` and `*-1`, alone or inside an aggregate (an `MGET` reply), are decode errors, and an
//!   incomplete frame holding one is an error, not "need more bytes". Its RESP2 decoder rejects
//!   every RESP3 type. The proxy does not know which protocol a connection speaks, so it
//!   would have to run both and tell from their errors which one applies.
//! - It takes the two bytes after a bulk string's payload without checking they are `\r\n`, so
//!   a wrong length desynchronises the split silently instead of failing.
//! - It rejects valid RESP3 it has no use for: verbatim formats other than `txt`/`mkd`, and
//!   aggregates as map keys or set members.
//! - It has no inline commands (only an inline `HELLO`), so requests would keep this code.
//! - It builds a tree (`Vec`s, a `HashMap` per map) for every attempt on a buffer.
//!
//! The tests below pin these cases (`frames_a_decoder_rejects_split_whole`, and the unterminated
//! bulk string in `garbage_is_an_error`).

use std::borrow::Cow;
use std::fmt;
use std::ops::ControlFlow;

/// Largest bulk length accepted before the stream is considered garbage (512 MiB, like Redis).
const MAX_BULK: i64 = 512 * 1024 * 1024;

/// The byte stream is not valid RESP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParseError(String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid RESP: {}", self.0)
    }
}

/// Index of the `\r` of the first `\r\n` at or after `from`, if the buffer holds one.
fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    let tail = buf.get(from..)?;
    tail.windows(2).position(|w| w == b"\r\n").map(|i| from + i)
}

fn parse_int(line: &[u8]) -> Result<i64, ParseError> {
    std::str::from_utf8(line)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or_else(|| ParseError(format!("bad length {:?}", String::from_utf8_lossy(line))))
}

fn to_usize(n: i64) -> Result<usize, ParseError> {
    usize::try_from(n).map_err(|_| ParseError(format!("bad length {n}")))
}

fn to_u64(n: i64) -> Result<u64, ParseError> {
    u64::try_from(n).map_err(|_| ParseError(format!("bad length {n}")))
}

/// Length of `count` consecutive RESP values at the start of `buf`, `Ok(None)` if incomplete.
///
/// Attribute frames (`|`) are attached to the value that follows them: they are counted as part
/// of that value, not as a value of their own.
fn values_len(buf: &[u8], count: u64) -> Result<Option<usize>, ParseError> {
    let mut pos = 0usize;
    let mut pending = count;
    while pending > 0 {
        let Some(&kind) = buf.get(pos) else {
            return Ok(None);
        };
        let Some(cr) = find_crlf(buf, pos + 1) else {
            return Ok(None);
        };
        let line = &buf[pos + 1..cr];
        let next = cr + 2;
        pending -= 1;
        match kind {
            b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => pos = next,
            b'$' | b'!' | b'=' => {
                let len = parse_int(line)?;
                if len == -1 && kind == b'$' {
                    pos = next;
                } else if (0..=MAX_BULK).contains(&len) {
                    let end = next + to_usize(len)? + 2;
                    if buf.len() < end {
                        return Ok(None);
                    }
                    if &buf[end - 2..end] != b"\r\n" {
                        return Err(ParseError("bulk string not terminated by CRLF".into()));
                    }
                    pos = end;
                } else {
                    return Err(ParseError(format!("bad bulk length {len}")));
                }
            }
            b'*' | b'~' | b'>' | b'%' | b'|' => {
                let n = parse_int(line)?;
                if n == -1 && kind == b'*' {
                    pos = next;
                    continue;
                }
                let n = to_u64(n)?;
                let children = match kind {
                    b'%' => n.checked_mul(2),
                    // The attribute's pairs, plus the value it annotates (which takes the slot
                    // this attribute was counted in).
                    b'|' => n.checked_mul(2).and_then(|x| x.checked_add(1)),
                    _ => Some(n),
                }
                .ok_or_else(|| ParseError(format!("bad aggregate length {n}")))?;
                pending = pending
                    .checked_add(children)
                    .ok_or_else(|| ParseError("aggregate too large".into()))?;
                pos = next;
            }
            other => {
                return Err(ParseError(format!("unexpected type byte {other:#04x}")));
            }
        }
    }
    Ok(Some(pos))
}

/// Length of the complete top-level frame at the start of `buf`, `Ok(None)` if incomplete.
///
/// With `inline_ok`, a frame not starting with a RESP type byte is an inline command ending at
/// `\n` (as `redis-cli`/telnet may send).
pub(crate) fn frame_len(buf: &[u8], inline_ok: bool) -> Result<Option<usize>, ParseError> {
    let Some(&first) = buf.first() else {
        return Ok(None);
    };
    if inline_ok && first != b'*' {
        return Ok(buf.iter().position(|&b| b == b'\n').map(|i| i + 1));
    }
    values_len(buf, 1)
}

/// Offset of the first byte after any leading attribute frames of a complete frame.
fn skip_attributes(frame: &[u8]) -> usize {
    let mut off = 0;
    while frame.get(off) == Some(&b'|') {
        let Some(cr) = find_crlf(frame, off + 1) else {
            return off;
        };
        let Ok(n) = parse_int(&frame[off + 1..cr]).and_then(to_u64) else {
            return off;
        };
        match n.checked_mul(2).map(|c| values_len(&frame[cr + 2..], c)) {
            Some(Ok(Some(len))) => off = cr + 2 + len,
            _ => return off,
        }
    }
    off
}

/// The value type byte of a complete frame, after any attributes.
pub(crate) fn frame_kind(frame: &[u8]) -> Option<u8> {
    frame.get(skip_attributes(frame)).copied()
}

/// The first element of a complete frame if it is an aggregate whose first element is a bulk
/// (or simple) string; for inline commands, the first word.
pub(crate) fn first_word(frame: &[u8]) -> Option<&[u8]> {
    let off = skip_attributes(frame);
    let kind = *frame.get(off)?;
    match kind {
        b'*' | b'>' | b'~' => {
            let cr = find_crlf(frame, off + 1)?;
            let n = parse_int(&frame[off + 1..cr]).ok()?;
            if n < 1 {
                return None;
            }
            let start = skip_attributes(&frame[cr + 2..]) + cr + 2;
            let elem_kind = *frame.get(start)?;
            let ecr = find_crlf(frame, start + 1)?;
            match elem_kind {
                b'$' => {
                    let len = to_usize(parse_int(&frame[start + 1..ecr]).ok()?).ok()?;
                    frame.get(ecr + 2..ecr + 2 + len)
                }
                b'+' => Some(&frame[start + 1..ecr]),
                _ => None,
            }
        }
        b'$' | b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' | b'!' | b'=' | b'%' | b'|' => None,
        _ => frame
            .split(|b| b.is_ascii_whitespace())
            .find(|w| !w.is_empty()),
    }
}

/// Accumulates bytes and yields complete top-level frames.
#[derive(Debug, Default)]
pub(crate) struct FrameSplitter {
    buf: Vec<u8>,
    pos: usize,
    inline_ok: bool,
    /// [`feed`](Self::feed) met bytes that are not RESP: it splits nothing any more.
    gave_up: bool,
}

impl FrameSplitter {
    /// A splitter for replies (RESP only).
    pub(crate) fn replies() -> Self {
        Self::default()
    }

    /// A splitter for requests (RESP arrays or inline commands).
    pub(crate) fn requests() -> Self {
        Self {
            inline_ok: true,
            ..Self::default()
        }
    }

    /// Append bytes read from the stream.
    pub(crate) fn push(&mut self, data: &[u8]) {
        if self.pos > 0 && self.pos >= self.buf.len() / 2 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(data);
    }

    /// The next complete frame, or `Ok(None)` if more bytes are needed.
    pub(crate) fn next_frame(&mut self) -> Result<Option<&[u8]>, ParseError> {
        let rest = &self.buf[self.pos..];
        match frame_len(rest, self.inline_ok)? {
            Some(n) => {
                let start = self.pos;
                self.pos += n;
                Ok(Some(&self.buf[start..start + n]))
            }
            None => Ok(None),
        }
    }

    /// Append `data` and hand each complete frame to `on_frame`, until it breaks (the frames
    /// after stay for the next call). Returns the bytes that will never be framed: at the first
    /// bytes that are not RESP the splitter gives up for good, and returns what it had not
    /// framed yet, then the whole of `data` on every later call.
    pub(crate) fn feed<'a>(
        &mut self,
        data: &'a [u8],
        mut on_frame: impl FnMut(&[u8]) -> ControlFlow<()>,
    ) -> Cow<'a, [u8]> {
        if self.gave_up {
            return Cow::Borrowed(data);
        }
        self.push(data);
        loop {
            match self.next_frame() {
                Ok(Some(frame)) => {
                    if on_frame(frame).is_break() {
                        return Cow::Borrowed(&[]);
                    }
                }
                Ok(None) => return Cow::Borrowed(&[]),
                Err(_) => {
                    self.gave_up = true;
                    return Cow::Owned(self.take_rest());
                }
            }
        }
    }

    /// Remove and return all bytes not yet returned as frames.
    pub(crate) fn take_rest(&mut self) -> Vec<u8> {
        let rest = self.buf.split_off(self.pos);
        self.buf.clear();
        self.pos = 0;
        rest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feed `stream` split at every possible point (and byte by byte) and check the frames.
    fn check_splits(stream: &[u8], inline_ok: bool, expected: &[&[u8]]) {
        let collect = |chunks: &[&[u8]]| {
            let mut s = FrameSplitter {
                inline_ok,
                ..FrameSplitter::default()
            };
            let mut out: Vec<Vec<u8>> = Vec::new();
            for c in chunks {
                s.push(c);
                while let Some(f) = s.next_frame().unwrap() {
                    out.push(f.to_vec());
                }
            }
            assert!(s.take_rest().is_empty());
            out
        };
        let expected: Vec<Vec<u8>> = expected.iter().map(|e| e.to_vec()).collect();
        assert_eq!(collect(&[stream]), expected, "whole");
        for cut in 0..=stream.len() {
            let (a, b) = stream.split_at(cut);
            assert_eq!(collect(&[a, b]), expected, "split at {cut}");
        }
        for cut1 in 0..=stream.len() {
            for cut2 in cut1..=stream.len() {
                let (a, rest) = stream.split_at(cut1);
                let (b, c) = rest.split_at(cut2 - cut1);
                assert_eq!(collect(&[a, b, c]), expected, "split at {cut1},{cut2}");
            }
        }
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(collect(&bytes), expected, "byte by byte");
    }

    #[test]
    fn resp2_replies() {
        let frames: &[&[u8]] = &[
            b"+OK\r\n",
            b"-ERR wrong\r\n",
            b":42\r\n",
            b"$5\r\nhe\r\nl\r\n",
            b"$0\r\n\r\n",
            b"$-1\r\n",
            b"*-1\r\n",
            b"*0\r\n",
            b"*3\r\n$3\r\nfoo\r\n:1\r\n*2\r\n+a\r\n$-1\r\n",
        ];
        check_splits(&frames.concat(), false, frames);
    }

    #[test]
    fn resp3_replies() {
        let frames: &[&[u8]] = &[
            b"_\r\n",
            b",3.14\r\n",
            b"#t\r\n",
            b"(3492890328409238509324850943850943825024385\r\n",
            b"!21\r\nSYNTAX invalid syntax\r\n",
            b"=15\r\ntxt:Some string\r\n",
            b"%2\r\n+first\r\n:1\r\n+second\r\n%1\r\n+x\r\n_\r\n",
            b"~2\r\n+a\r\n+b\r\n",
            b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n",
            b"|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.1923\r\n$1\r\nb\r\n,0.0012\r\n*2\r\n:2039123\r\n:9543892\r\n",
            b"*2\r\n|1\r\n+ttl\r\n:3600\r\n:1\r\n:2\r\n",
        ];
        check_splits(&frames.concat(), false, frames);
    }

    #[test]
    fn requests_and_inline() {
        let frames: &[&[u8]] = &[
            b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n",
            b"PING\r\n",
            b"*3\r\n$7\r\nEVALSHA\r\n$3\r\nabc\r\n$1\r\n0\r\n",
        ];
        check_splits(&frames.concat(), true, frames);
    }

    /// Frames a decoder would reject or misread but a splitter must pass whole: RESP2 nulls
    /// inside aggregates, any verbatim format, aggregates as map keys and set members.
    #[test]
    fn frames_a_decoder_rejects_split_whole() {
        let frames: &[&[u8]] = &[
            b"*3\r\n$1\r\na\r\n$-1\r\n*-1\r\n",
            b"=15\r\nxyz:Some string\r\n",
            b"%1\r\n*1\r\n:1\r\n+v\r\n",
            b"~2\r\n*1\r\n:1\r\n%0\r\n",
            b"%1\r\n+k\r\n*-1\r\n",
        ];
        check_splits(&frames.concat(), false, frames);
    }

    #[test]
    fn feed_gives_up_at_garbage() {
        let mut s = FrameSplitter::replies();
        let mut frames: Vec<Vec<u8>> = Vec::new();
        let mut collect = |f: &[u8]| {
            frames.push(f.to_vec());
            ControlFlow::Continue(())
        };
        assert!(s.feed(b"+OK\r\n:1", &mut collect).is_empty());
        assert_eq!(&*s.feed(b"\r\n?x\r\n+", &mut collect), b"?x\r\n+");
        assert_eq!(&*s.feed(b"OK\r\n", &mut collect), b"OK\r\n");
        assert_eq!(frames, [&b"+OK\r\n"[..], b":1\r\n"]);

        let mut s = FrameSplitter::replies();
        let mut seen = 0;
        let rest = s.feed(b"+a\r\n+b\r\n", |_| {
            seen += 1;
            ControlFlow::Break(())
        });
        assert!(rest.is_empty());
        assert_eq!(seen, 1);
        assert_eq!(s.next_frame().unwrap(), Some(&b"+b\r\n"[..]));
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(frame_len(b"?x\r\n", false).is_err());
        assert!(frame_len(b"$abc\r\n", false).is_err());
        assert!(frame_len(b"$3\r\nabcde\r\n", false).is_err());
        assert!(frame_len(b"*-5\r\n", false).is_err());
    }

    #[test]
    fn kinds_and_first_words() {
        assert_eq!(frame_kind(b"+OK\r\n"), Some(b'+'));
        assert_eq!(frame_kind(b"|1\r\n+a\r\n+b\r\n>1\r\n+x\r\n"), Some(b'>'));
        assert_eq!(
            first_word(b"*2\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n"),
            Some(&b"subscribe"[..])
        );
        assert_eq!(
            first_word(b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n"),
            Some(&b"message"[..])
        );
        assert_eq!(first_word(b"  ping  \r\n"), Some(&b"ping"[..]));
        assert_eq!(first_word(b"*1\r\n:1\r\n"), None);
        assert_eq!(first_word(b"$3\r\nabc\r\n"), None);
        assert_eq!(first_word(b"*0\r\n"), None);
    }
}
