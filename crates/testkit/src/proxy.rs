//! A TCP proxy in front of a Redis server that injects network faults.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Notify};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::resp::{first_word, frame_kind, FrameSplitter};

/// How long a proxied connection may take to reach the target.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Read buffer size per direction.
const BUF_SIZE: usize = 64 * 1024;

/// Commands after which the server answers with pub/sub frames instead of one reply each.
const SUBSCRIBE_COMMANDS: [&[u8]; 6] = [
    b"subscribe",
    b"unsubscribe",
    b"psubscribe",
    b"punsubscribe",
    b"ssubscribe",
    b"sunsubscribe",
];
/// First elements of RESP2 pub/sub frames that carry a message, which are not replies to a
/// request; the other pub/sub frames (confirmations) start with their command's name, one of
/// [`SUBSCRIBE_COMMANDS`].
const MESSAGE_FRAMES: [&[u8]; 3] = [b"message", b"pmessage", b"smessage"];

fn is_one_of(word: &[u8], set: &[&[u8]]) -> bool {
    set.iter().any(|w| w.eq_ignore_ascii_case(word))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

/// A TCP proxy on a free loopback port in front of a target address, for fault injection.
///
/// It runs as tasks on the tokio runtime that called [`FaultProxy::start`]. Each accepted client
/// connection gets its own connection to the target. Dropping the proxy stops all its tasks and
/// closes (resets) all its connections.
///
/// Replies are paired with requests by parsing RESP in both directions (RESP2 and RESP3; RESP3
/// push frames and RESP2 pub/sub messages are recognised as not being replies). Requests that
/// only produce pub/sub frames (`SUBSCRIBE` and friends) are never matched by
/// [`drop_reply_matching`](Self::drop_reply_matching). If a connection carries something that
/// is not RESP, the proxy forwards it unparsed and stops matching on that connection.
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept_task: AbortHandle,
}

impl fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let reg = self.shared.reg.lock();
        f.debug_struct("FaultProxy")
            .field("addr", &self.addr)
            .field("target", &self.shared.target)
            .field("connections", &reg.conns.len())
            .field("blackhole", &reg.blackhole)
            .field("refuse", &reg.refuse)
            .field("reply_delay", &*self.shared.reply_delay.lock())
            .finish_non_exhaustive()
    }
}

struct Shared {
    target: SocketAddr,
    reply_delay: Mutex<Duration>,
    rules: Mutex<Vec<DropRule>>,
    reg: Mutex<Registry>,
    count: watch::Sender<usize>,
}

impl Shared {
    /// Consume one use of the first rule matching `frame`, returning its hold time.
    fn take_matching_rule(&self, frame: &[u8]) -> Option<Duration> {
        let mut rules = self.rules.lock();
        let idx = rules
            .iter()
            .position(|r| r.remaining > 0 && contains(frame, &r.needle))?;
        let rule = &mut rules[idx];
        rule.remaining -= 1;
        let hold = rule.hold;
        if rule.remaining == 0 {
            rules.remove(idx);
        }
        Some(hold)
    }
}

struct DropRule {
    needle: Vec<u8>,
    remaining: usize,
    hold: Duration,
}

#[derive(Default)]
struct Registry {
    conns: HashMap<u64, ConnEntry>,
    next_id: u64,
    blackhole: bool,
    refuse: bool,
}

struct ConnEntry {
    state: Arc<ConnState>,
    task: AbortHandle,
}

/// Abort the given connections, making them close with a reset.
/// Must be called without holding the registry lock (an abort may drop the task right away).
fn reset_connections(entries: Vec<(Arc<ConnState>, AbortHandle)>) {
    for (state, task) in entries {
        state.rst.store(true, Ordering::SeqCst);
        task.abort();
    }
}

/// Per-connection state shared by the connection's tasks and the proxy handle.
#[derive(Default)]
struct ConnState {
    /// Affected by the blackhole: forward nothing until reset.
    blackholed: AtomicBool,
    /// A reply was withheld: forward nothing until reset.
    dropped: AtomicBool,
    /// Close the sockets with a TCP reset instead of a FIN.
    rst: AtomicBool,
    /// Set when `dropped` is: the moment at which to reset the connection.
    reset_at: Mutex<Option<Instant>>,
    dropped_notify: Notify,
    /// One entry per forwarded request that expects a reply, in order:
    /// `Some(hold)` if its reply is to be withheld.
    marks: Mutex<VecDeque<Option<Duration>>>,
    /// The client sent a subscribe-family command (enables RESP2 pub/sub frame detection).
    subscribed: AtomicBool,
    /// This connection's own reply delay, overriding the proxy-wide one.
    reply_delay: Mutex<Option<Duration>>,
}

impl ConnState {
    fn silenced(&self) -> bool {
        self.blackholed.load(Ordering::SeqCst) || self.dropped.load(Ordering::SeqCst)
    }

    fn register_request(&self, shared: &Shared, frame: &[u8]) {
        if first_word(frame).is_some_and(|w| is_one_of(w, &SUBSCRIBE_COMMANDS)) {
            self.subscribed.store(true, Ordering::SeqCst);
            return;
        }
        let hold = shared.take_matching_rule(frame);
        self.marks.lock().push_back(hold);
    }

    fn is_out_of_band(&self, frame: &[u8]) -> bool {
        match frame_kind(frame) {
            Some(b'>') => true,
            Some(b'*') if self.subscribed.load(Ordering::SeqCst) => {
                first_word(frame).is_some_and(|w| {
                    is_one_of(w, &MESSAGE_FRAMES) || is_one_of(w, &SUBSCRIBE_COMMANDS)
                })
            }
            _ => false,
        }
    }
}

/// Removes a connection from the registry when its task ends or is aborted.
struct Registration {
    shared: Arc<Shared>,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut reg = self.shared.reg.lock();
        reg.conns.remove(&self.id);
        self.shared.count.send_replace(reg.conns.len());
    }
}

/// A read half that resets the connection on drop if asked to.
struct ReadHalf {
    inner: OwnedReadHalf,
    state: Arc<ConnState>,
}

impl ReadHalf {
    /// Read into `buf`; `None` once the peer has closed or the read failed.
    async fn read_some(&mut self, buf: &mut [u8]) -> Option<usize> {
        match self.inner.read(buf).await {
            Ok(0) | Err(_) => None,
            Ok(n) => Some(n),
        }
    }
}

impl Drop for ReadHalf {
    fn drop(&mut self) {
        if self.state.rst.load(Ordering::SeqCst) {
            let _ = self.inner.as_ref().set_zero_linger();
        }
    }
}

/// Aborts tasks when dropped.
struct AbortOnDrop(Vec<AbortHandle>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for h in &self.0 {
            h.abort();
        }
    }
}

/// Bytes to forward to the client, not before `at`.
struct Chunk {
    at: Instant,
    data: Vec<u8>,
}

impl FaultProxy {
    /// Start a proxy on a free loopback port forwarding to `target`.
    ///
    /// Must be called within a tokio runtime; the proxy's tasks run on it.
    ///
    /// # Errors
    ///
    /// If no loopback port can be bound.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call closes the listener it bound.
    pub async fn start(target: SocketAddr) -> std::io::Result<FaultProxy> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        crate::server::reserve_port(addr.port());
        let shared = Arc::new(Shared {
            target,
            reply_delay: Mutex::new(Duration::ZERO),
            rules: Mutex::new(Vec::new()),
            reg: Mutex::new(Registry::default()),
            count: watch::Sender::new(0),
        });
        let accept_task = tokio::spawn(accept_loop(listener, Arc::clone(&shared))).abort_handle();
        Ok(FaultProxy {
            addr,
            shared,
            accept_task,
        })
    }

    /// The proxy's listening address (`127.0.0.1:<port>`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address the proxy forwards to.
    pub fn target(&self) -> SocketAddr {
        self.shared.target
    }

    /// `redis://127.0.0.1:<port>/` for the proxy.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.addr.port())
    }

    /// A plain (RESP2) `redis::Client` connecting through the proxy.
    ///
    /// # Panics
    ///
    /// Never in practice: the URL is always valid.
    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("valid redis URL")
    }

    /// Delay every chunk forwarded server to client (replies) by `d`, counted from when the
    /// proxy receives it, from now on. Bytes stay in order. `Duration::ZERO` turns it off.
    pub fn set_reply_delay(&self, d: Duration) {
        *self.shared.reply_delay.lock() = d;
    }

    /// Delay the replies (and push messages) of one connection only: the
    /// `nth` connection this proxy accepted, counting from 0 (a deadbolt
    /// client opens its command connection first, then its subscriber
    /// connection). Overrides [`set_reply_delay`](Self::set_reply_delay) for
    /// that connection; returns false when no such connection is open.
    pub fn set_connection_reply_delay(&self, nth: u64, d: Duration) -> bool {
        match self.shared.reg.lock().conns.get(&nth) {
            Some(e) => {
                *e.state.reply_delay.lock() = Some(d);
                true
            }
            None => false,
        }
    }

    /// Withhold the reply to the next `count` requests whose raw RESP frame contains `needle`
    /// (a case-sensitive byte substring, e.g. `b"EVALSHA"`, a script SHA or a key name).
    ///
    /// A matching request is still forwarded, so the server executes it. When its reply
    /// arrives, the proxy withholds it and everything after it on that connection: from then on
    /// it forwards nothing in either direction on that connection, and `hold` after the moment
    /// the reply would have been delivered it resets both the client connection and its server
    /// connection. Replies to earlier requests on the connection are still delivered.
    ///
    /// Rules add up; each matching request consumes one use of the oldest matching rule.
    pub fn drop_reply_matching(&self, needle: &[u8], count: usize, hold: Duration) {
        if count == 0 {
            return;
        }
        self.shared.rules.lock().push(DropRule {
            needle: needle.to_vec(),
            remaining: count,
            hold,
        });
    }

    /// Forget all pending [`drop_reply_matching`](Self::drop_reply_matching) rules.
    pub fn clear_drop_rules(&self) {
        self.shared.rules.lock().clear();
    }

    /// While on, existing and new connections forward nothing in either direction (bytes are
    /// read and discarded). Turning it off does not deliver those bytes: every connection that
    /// existed or was opened while it was on is reset instead.
    pub fn set_blackhole(&self, on: bool) {
        let mut reg = self.shared.reg.lock();
        reg.blackhole = on;
        if on {
            for e in reg.conns.values() {
                e.state.blackholed.store(true, Ordering::SeqCst);
            }
            return;
        }
        let affected = reg
            .conns
            .values()
            .filter(|e| e.state.blackholed.load(Ordering::SeqCst))
            .map(|e| (Arc::clone(&e.state), e.task.clone()))
            .collect();
        drop(reg);
        reset_connections(affected);
    }

    /// Reset every current connection (both the client and the server side) at once.
    /// New connections are still accepted.
    pub fn reset_all(&self) {
        let all = self
            .shared
            .reg
            .lock()
            .conns
            .values()
            .map(|e| (Arc::clone(&e.state), e.task.clone()))
            .collect();
        reset_connections(all);
    }

    /// While on, new connections are accepted and immediately reset.
    pub fn set_refuse(&self, on: bool) {
        self.shared.reg.lock().refuse = on;
    }

    /// Number of client connections currently proxied.
    ///
    /// Connections closed by [`reset_all`](Self::reset_all) or the blackhole leave this count
    /// shortly after the call; use [`wait_for_connections`](Self::wait_for_connections) to wait.
    pub fn connections(&self) -> usize {
        self.shared.reg.lock().conns.len()
    }

    /// Wait until exactly `n` client connections are proxied.
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches.
    pub async fn wait_for_connections(&self, n: usize) {
        let mut rx = self.shared.count.subscribe();
        // The sender lives in `self.shared`, so the channel cannot close while we wait.
        let _ = rx.wait_for(|&c| c == n).await;
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept_task.abort();
        let mut reg = self.shared.reg.lock();
        reg.refuse = true;
        let all = reg
            .conns
            .values()
            .map(|e| (Arc::clone(&e.state), e.task.clone()))
            .collect();
        drop(reg);
        reset_connections(all);
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let sock = match listener.accept().await {
            Ok((sock, _)) => sock,
            Err(_) => {
                // E.g. out of file descriptors: back off instead of spinning.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = sock.set_nodelay(true);
        let mut reg = shared.reg.lock();
        if reg.refuse {
            drop(reg);
            let _ = sock.set_zero_linger();
            drop(sock);
            continue;
        }
        let id = reg.next_id;
        reg.next_id += 1;
        let state = Arc::new(ConnState::default());
        state.blackholed.store(reg.blackhole, Ordering::SeqCst);
        // Spawned while holding the lock, so the task cannot deregister before it is registered.
        let task = tokio::spawn(run_conn(
            Registration {
                shared: Arc::clone(&shared),
                id,
            },
            Arc::clone(&state),
            sock,
        ));
        reg.conns.insert(
            id,
            ConnEntry {
                state,
                task: task.abort_handle(),
            },
        );
        shared.count.send_replace(reg.conns.len());
    }
}

/// Read and discard everything from `sock` until it closes.
async fn swallow(mut sock: TcpStream) {
    let _ = sock.set_zero_linger();
    let mut buf = vec![0u8; BUF_SIZE];
    while let Ok(n) = sock.read(&mut buf).await {
        if n == 0 {
            break;
        }
    }
}

async fn run_conn(reg: Registration, state: Arc<ConnState>, client: TcpStream) {
    let shared = Arc::clone(&reg.shared);
    if state.blackholed.load(Ordering::SeqCst) {
        // Opened during a blackhole: never reaches the server; reset when it is turned off.
        swallow(client).await;
        return;
    }
    let server =
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(shared.target)).await {
            Ok(Ok(s)) => s,
            _ => {
                let _ = client.set_zero_linger();
                return;
            }
        };
    let _ = server.set_nodelay(true);
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    let cr = ReadHalf {
        inner: cr,
        state: Arc::clone(&state),
    };
    let sr = ReadHalf {
        inner: sr,
        state: Arc::clone(&state),
    };
    let (tx, rx) = mpsc::unbounded_channel();
    let mut requests = tokio::spawn(pump_requests(
        Arc::clone(&shared),
        Arc::clone(&state),
        cr,
        sw,
    ));
    let replies = tokio::spawn(pump_replies(
        Arc::clone(&shared),
        Arc::clone(&state),
        sr,
        tx,
    ));
    let mut writer = tokio::spawn(write_replies(Arc::clone(&state), rx, cw));
    let _abort = AbortOnDrop(vec![
        requests.abort_handle(),
        replies.abort_handle(),
        writer.abort_handle(),
    ]);
    tokio::select! {
        biased;
        () = state.dropped_notify.notified() => {
            let reset_at = state.reset_at.lock().unwrap_or_else(Instant::now);
            tokio::time::sleep_until(reset_at).await;
            state.rst.store(true, Ordering::SeqCst);
        }
        // The client closed (or errored): nothing more to do.
        _ = &mut requests => {}
        // The server closed and everything it sent was delivered, or the client errored.
        _ = &mut writer => {}
    }
    // Dropping `_abort` ends the tasks, which closes all four socket halves.
    drop(reg);
}

/// Client to server: forward requests, recording for each one whether its reply is withheld.
async fn pump_requests(
    shared: Arc<Shared>,
    state: Arc<ConnState>,
    mut from_client: ReadHalf,
    mut to_server: OwnedWriteHalf,
) {
    let mut splitter = FrameSplitter::requests();
    let mut buf = vec![0u8; BUF_SIZE];
    while let Some(n) = from_client.read_some(&mut buf).await {
        if state.silenced() {
            continue;
        }
        let data = &buf[..n];
        // Record marks before forwarding, so they exist before the server can reply. What
        // does not split is forwarded all the same (below), unmarked.
        splitter.feed(data, |frame| {
            state.register_request(&shared, frame);
            ControlFlow::Continue(())
        });
        if to_server.write_all(data).await.is_err() {
            return;
        }
    }
}

/// Server to client: split replies into frames, withhold a marked reply, queue the rest.
async fn pump_replies(
    shared: Arc<Shared>,
    state: Arc<ConnState>,
    mut from_server: ReadHalf,
    to_writer: mpsc::UnboundedSender<Chunk>,
) {
    let mut splitter = FrameSplitter::replies();
    let mut buf = vec![0u8; BUF_SIZE];
    while let Some(n) = from_server.read_some(&mut buf).await {
        let delay = state
            .reply_delay
            .lock()
            .unwrap_or_else(|| *shared.reply_delay.lock());
        let at = Instant::now() + delay;
        if state.silenced() {
            continue;
        }
        let mut out = Vec::new();
        let mut withheld = None;
        let unsplit = splitter.feed(&buf[..n], |frame| {
            if !state.is_out_of_band(frame) {
                if let Some(Some(hold)) = state.marks.lock().pop_front() {
                    withheld = Some(hold);
                    return ControlFlow::Break(());
                }
            }
            out.extend_from_slice(frame);
            ControlFlow::Continue(())
        });
        out.extend_from_slice(&unsplit);
        if !out.is_empty() {
            let _ = to_writer.send(Chunk { at, data: out });
        }
        if let Some(hold) = withheld {
            *state.reset_at.lock() = Some(at + hold);
            state.dropped.store(true, Ordering::SeqCst);
            state.dropped_notify.notify_one();
        }
    }
}

/// Deliver queued chunks to the client, each not before its time.
async fn write_replies(
    state: Arc<ConnState>,
    mut queue: mpsc::UnboundedReceiver<Chunk>,
    mut to_client: OwnedWriteHalf,
) {
    while let Some(chunk) = queue.recv().await {
        tokio::time::sleep_until(chunk.at).await;
        if state.blackholed.load(Ordering::SeqCst) {
            continue;
        }
        if to_client.write_all(&chunk.data).await.is_err() {
            return;
        }
    }
}
