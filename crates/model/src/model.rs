//! The steps: one per script call (atomic on the server), the client's
//! own moves between them, Pub/Sub deliveries and faults, and time.

use stateright::{Model, Property};

use crate::config::{Config, Mutation, Primitive};
use crate::net::{listens, Out};
use crate::state::{
    Attempt, Client, Envelope, FairKeys, LockKeys, Msg, Phase, SemKeys, Server, State, Waiter,
};
use crate::{fair, lock, props, sem, Reply};

/// One step of the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The waiter's acquire script: its first try ('wait') from idle, a
    /// later one ('again') when ready.
    Acquire(u8),
    /// The same call, whose reply is lost (Indeterminate): the waiter
    /// retries with the same attempt id. A fault.
    AcquireLost(u8),
    /// The waiter subscribes after a failed first try (then tries again).
    Subscribe(u8),
    /// The waiter's sleep bound passes: it tries again. Not prompt.
    Timer(u8),
    /// The holder unlocks: the release script; a Lock client then wakes
    /// one of its own sleeping waiters.
    Release(u8),
    /// PassOverUnheard only: the release, with an unheard grant's
    /// registration taken as older than its claim.
    ReleasePassOver(u8),
    /// lock_pass: the holder (first) hands the lock to a waiter of its client.
    Pass(u8, u8),
    /// The watchdog renews the waiter's hold (hold_renew / sem_renew).
    Renew(u8),
    /// The waiter gives up (a dropped future): its attempt goes to the
    /// releaser. A fault.
    Cancel(u8),
    /// The client's background releaser releases its oldest pending attempt.
    Releaser(u8),
    /// The client's waiter heartbeat (fair_heartbeat / sem_heartbeat).
    Heartbeat(u8),
    /// An operator's force-unlock. Counted as a fault.
    ForceUnlock,
    /// Message `i` of the network reaches waiter `w` of its client.
    Deliver(usize, u8),
    /// Message `i` reaches a client where no waiter takes it.
    Drop(usize),
    /// Message `i` is lost. A fault.
    Lose(usize),
    /// Message `i` is duplicated. A fault.
    Duplicate(usize),
    /// The client crashes. A fault.
    Crash(u8),
    /// The client's Pub/Sub connection drops and comes back: messages in
    /// flight to it are lost, every waiter of it tries again. A fault.
    Reconnect(u8),
    /// Time: the lease of the hold of this waiter's current or past
    /// attempt runs out (a fault while that attempt goes on in a live client).
    Expire(Attempt),
    /// Time: the client's liveness record runs out (a fault while it has waiters).
    ExpireAlive(u8),
    /// Time: the claim of grant message `i` runs out before delivery.
    AgeGrant(usize),
}

impl Action {
    /// Whether the step is prompt: no timer, no time passing, no fault.
    pub fn prompt(self) -> bool {
        !matches!(
            self,
            Action::Timer(_)
                | Action::AcquireLost(_)
                | Action::Cancel(_)
                | Action::ForceUnlock
                | Action::Lose(_)
                | Action::Duplicate(_)
                | Action::Crash(_)
                | Action::Reconnect(_)
                | Action::Expire(_)
                | Action::ExpireAlive(_)
                | Action::AgeGrant(_)
        )
    }
}

/// The script a step runs for `primitive`, if it runs one.
pub fn script(primitive: Primitive, action: Action) -> Option<&'static str> {
    use Primitive::*;
    Some(match (primitive, action) {
        (Lock, Action::Acquire(_) | Action::AcquireLost(_)) => "lock_acquire",
        (Fair, Action::Acquire(_) | Action::AcquireLost(_)) => "fair_acquire",
        (Semaphore(_), Action::Acquire(_) | Action::AcquireLost(_)) => "sem_acquire",
        (Lock, Action::Release(_) | Action::ReleasePassOver(_) | Action::Releaser(_)) => {
            "lock_release"
        }
        (Fair, Action::Release(_) | Action::Releaser(_)) => "fair_release",
        (Semaphore(_), Action::Release(_) | Action::Releaser(_)) => "sem_release",
        (Lock, Action::Pass(..)) => "lock_pass",
        (Lock | Fair, Action::Renew(_)) => "hold_renew",
        (Semaphore(_), Action::Renew(_)) => "sem_renew",
        (Fair, Action::Heartbeat(_)) => "fair_heartbeat",
        (Semaphore(_), Action::Heartbeat(_)) => "sem_heartbeat",
        (Lock, Action::ForceUnlock) => "lock_force_unlock",
        (Fair, Action::ForceUnlock) => "fair_force_unlock",
        _ => return None,
    })
}

/// Every script the model has a step for, over all primitives.
pub fn modelled_scripts() -> Vec<&'static str> {
    let steps = [
        Action::Acquire(0),
        Action::Release(0),
        Action::Pass(0, 1),
        Action::Renew(0),
        Action::Heartbeat(0),
        Action::ForceUnlock,
    ];
    let mut out: Vec<_> = [Primitive::Lock, Primitive::Fair, Primitive::Semaphore(1)]
        .into_iter()
        .flat_map(|p| steps.iter().filter_map(move |&a| script(p, a)))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The model of one primitive's grant protocol under `config`.
#[derive(Clone, Debug)]
pub struct GrantModel {
    /// What the run covers.
    pub config: Config,
}

impl GrantModel {
    /// A model of `config`.
    pub fn new(config: Config) -> GrantModel {
        GrantModel { config }
    }

    fn attempt(s: &State, w: u8) -> Attempt {
        Attempt {
            waiter: w,
            round: s.waiters[usize::from(w)].round,
        }
    }

    fn out(&self) -> Out {
        match self.config.mutation {
            Mutation::ReleaseForgetsToPublish => Out::Off,
            _ => Out::On,
        }
    }

    /// The primitive's acquire script for `a`.
    fn run_acquire(&self, s: &mut State, w: u8, again: bool) -> Reply {
        let cfg = &self.config;
        let a = Self::attempt(s, w);
        let secret = s.waiters[usize::from(w)].secrets;
        let r = match cfg.primitive {
            Primitive::Lock => lock::acquire(s, cfg, a, again, secret),
            Primitive::Fair => fair::acquire(s, cfg, a, secret),
            Primitive::Semaphore(_) => sem::acquire(s, cfg, a, secret),
        };
        if let Reply::Queued { fresh: true, .. } = r {
            s.waiters[usize::from(w)].secrets += 1;
        }
        r
    }

    /// The primitive's release script for `a` (by the holder or the releaser).
    fn run_release(&self, s: &mut State, a: Attempt, pass_over: bool) {
        let cfg = &self.config;
        match cfg.primitive {
            Primitive::Lock => {
                lock::release(s, cfg, a, self.out(), pass_over);
            }
            Primitive::Fair => {
                fair::release(s, cfg, a, self.out());
            }
            Primitive::Semaphore(_) => {
                sem::release(s, cfg, a, self.out());
            }
        }
    }

    /// The waiter takes a grant: it believes it holds with `token`.
    fn take(&self, s: &mut State, w: u8, token: u32) {
        let fenced = !matches!(self.config.primitive, Primitive::Semaphore(_));
        let forced = fenced && s.forced.contains(&token);
        if fenced && !forced {
            if token <= s.last_taken {
                s.token_repeat = true;
            }
            s.last_taken = s.last_taken.max(token);
        }
        s.waiters[usize::from(w)].phase = Phase::Holding { token, forced };
    }

    /// The waiter's acquire is over (released, lost, cancelled): next round.
    fn finish(s: &mut State, w: u8) {
        let x = &mut s.waiters[usize::from(w)];
        x.round += 1;
        x.phase = Phase::Idle;
        x.subscribed = false;
        x.entry = None;
    }

    fn on_reply(&self, s: &mut State, w: u8, r: Reply) {
        match r {
            Reply::Granted(t) => self.take(s, w, t),
            Reply::Busy | Reply::Queued { .. } => {
                let x = &mut s.waiters[usize::from(w)];
                if let Reply::Queued { secret, .. } = r {
                    x.entry = Some(secret);
                }
                x.phase = if x.subscribed {
                    Phase::Sleeping
                } else {
                    Phase::NeedSub
                };
            }
        }
    }

    fn waiters_of(&self, c: u8) -> impl Iterator<Item = u8> {
        let n = self.config.waiters_per_client;
        (c * n)..(c * n + n)
    }

    /// The hold of `a` on the server, if the server records one: its token
    /// (0 for permits) and whether its TTL is a claim.
    fn server_hold(s: &State, a: Attempt) -> Option<(u32, bool)> {
        match &s.server {
            Server::Lock(k) => k
                .hold
                .as_ref()
                .filter(|h| h.attempt == a)
                .map(|h| (h.token, h.claim)),
            Server::Fair(k) => k
                .hold
                .as_ref()
                .filter(|h| h.attempt == a)
                .map(|h| (h.token, h.claim)),
            Server::Sem(k) => k
                .holds
                .iter()
                .find(|h| h.attempt == a)
                .map(|h| (0, h.claim)),
        }
    }

    /// Attempts whose hold the server records.
    fn server_holders(s: &State) -> Vec<Attempt> {
        match &s.server {
            Server::Lock(k) => k.hold.iter().map(|h| h.attempt).collect(),
            Server::Fair(k) => k.hold.iter().map(|h| h.attempt).collect(),
            Server::Sem(k) => k.holds.iter().map(|h| h.attempt).collect(),
        }
    }

    /// Whether attempt `a` is still going on in a live client: its lease
    /// (or claim) running out is then a fault (renewals failing, a grant
    /// taken late); once the client crashed or the attempt ended, it is
    /// just time passing.
    fn lives(&self, s: &State, a: Attempt) -> bool {
        !s.clients[usize::from(self.config.client_of(a.waiter))].crashed
            && s.waiters[usize::from(a.waiter)].round == a.round
    }

    /// `lock_acquire` (or its kind's) for waiter `w`; `lost`: its reply is
    /// lost (a fault), so the waiter tries again.
    fn acquire_step(&self, s: &mut State, w: u8, lost: bool) {
        let again = s.waiters[usize::from(w)].phase == Phase::Ready;
        let r = self.run_acquire(s, w, again);
        if lost {
            spend(s);
            let x = &mut s.waiters[usize::from(w)];
            x.phase = if x.subscribed {
                Phase::Ready
            } else {
                Phase::NeedSub
            };
        } else {
            self.on_reply(s, w, r);
        }
    }

    /// The release of waiter `w`'s hold (`pass_over`: the PassOverUnheard
    /// mutation's path); a Lock's unlock then wakes one of its client's
    /// sleeping waiters.
    fn release_step(&self, s: &mut State, w: u8, pass_over: bool) {
        let a = Self::attempt(s, w);
        self.run_release(s, a, pass_over);
        Self::finish(s, w);
        if self.config.primitive == Primitive::Lock {
            let c = self.config.client_of(w);
            if let Some(v) = self
                .waiters_of(c)
                .find(|&v| s.waiters[usize::from(v)].phase == Phase::Sleeping)
            {
                s.waiters[usize::from(v)].phase = Phase::Ready;
            }
        }
    }

    /// Message `i` of the network reaches waiter `w`'s client.
    fn deliver(&self, s: &mut State, i: usize, w: u8) {
        let e = s.net.remove(i);
        match e.msg {
            Msg::Grant {
                token,
                secret,
                valid,
                ..
            } => {
                if valid && s.waiters[usize::from(w)].entry == Some(secret) {
                    self.take(s, w, token);
                } else {
                    s.waiters[usize::from(w)].phase = Phase::Ready;
                }
            }
            Msg::Notice => s.waiters[usize::from(w)].phase = Phase::Ready,
            Msg::Forced => {
                for v in self.waiters_of(e.to) {
                    if let Phase::Holding { forced: true, .. } = s.waiters[usize::from(v)].phase {
                        Self::finish(s, v);
                    }
                }
            }
        }
    }

    /// The lease of attempt `a`'s hold runs out on the server.
    fn expire(&self, s: &mut State, a: Attempt) {
        if self.lives(s, a) {
            spend(s);
        }
        let token = Self::server_hold(s, a).map_or(0, |(t, _)| t);
        match &mut s.server {
            Server::Lock(k) => k.hold = None,
            Server::Fair(k) => k.hold = None,
            Server::Sem(k) => k.holds.retain(|h| h.attempt != a),
        }
        // The holder's local validity ends no later than the TTL.
        let w = &s.waiters[usize::from(a.waiter)];
        if w.round == a.round && matches!(w.phase, Phase::Holding { .. }) {
            Self::finish(s, a.waiter);
        }
        for e in &mut s.net {
            if let Msg::Grant {
                attempt,
                token: t,
                valid,
                ..
            } = &mut e.msg
            {
                if *attempt == a && *t == token {
                    *valid = false;
                }
            }
        }
        s.net.sort();
    }

    /// Client `c` crashes: its waiters and pending releases are gone.
    fn crash(&self, s: &mut State, c: u8) {
        spend(s);
        s.clients[usize::from(c)].crashed = true;
        s.clients[usize::from(c)].pending.clear();
        for w in self.waiters_of(c) {
            let x = &mut s.waiters[usize::from(w)];
            x.phase = Phase::Crashed;
            x.subscribed = false;
        }
        s.net.retain(|e| e.to != c);
    }

    fn deliverable(&self, s: &State, e: Envelope, w: u8) -> bool {
        let x = &s.waiters[usize::from(w)];
        if !x.subscribed {
            return false;
        }
        match e.msg {
            Msg::Grant { attempt, .. } => {
                attempt == Self::attempt(s, w) && matches!(x.phase, Phase::Sleeping | Phase::Ready)
            }
            Msg::Notice => x.phase == Phase::Sleeping,
            Msg::Forced => false,
        }
    }

    /// A holder's renewal (its primitive's renew script); a hold the
    /// server no longer has ends the waiter's hold.
    fn renew_step(&self, s: &mut State, w: u8) {
        let a = Self::attempt(s, w);
        let kept = match self.config.primitive {
            Primitive::Lock => lock::renew(s, a),
            Primitive::Fair => fair::renew(s, a),
            Primitive::Semaphore(_) => sem::renew(s, a),
        };
        if !kept {
            Self::finish(s, w);
        }
    }

    /// Client `c`'s subscriber reconnects: what was on its way to it is
    /// lost, and every sleeping waiter of it tries again.
    fn reconnect(&self, s: &mut State, c: u8) {
        spend(s);
        s.net.retain(|e| e.to != c);
        for w in self.waiters_of(c) {
            let x = &mut s.waiters[usize::from(w)];
            if x.phase == Phase::Sleeping {
                x.phase = Phase::Ready;
            }
        }
    }

    /// What each waiter may do next: acquire, subscribe, wake on its timer,
    /// release, pass, renew, cancel.
    fn waiter_actions(&self, s: &State, out: &mut Vec<Action>) {
        let cfg = &self.config;
        let fault = s.faults > 0;
        for w in 0..cfg.waiters() {
            let x = &s.waiters[usize::from(w)];
            let c = cfg.client_of(w);
            match x.phase {
                Phase::Idle if x.round < cfg.rounds => {
                    out.push(Action::Acquire(w));
                    if fault {
                        out.push(Action::AcquireLost(w));
                    }
                }
                Phase::Ready => {
                    out.push(Action::Acquire(w));
                    if fault {
                        out.push(Action::AcquireLost(w));
                    }
                }
                Phase::NeedSub => out.push(Action::Subscribe(w)),
                Phase::Sleeping => out.push(Action::Timer(w)),
                Phase::Holding { forced, .. } => {
                    out.push(Action::Release(w));
                    if cfg.mutation == Mutation::PassOverUnheard {
                        out.push(Action::ReleasePassOver(w));
                    }
                    if cfg.primitive == Primitive::Lock && !forced {
                        for v in self.waiters_of(c) {
                            if v != w && s.waiters[usize::from(v)].phase.waiting() {
                                out.push(Action::Pass(w, v));
                            }
                        }
                    }
                    let a = Self::attempt(s, w);
                    if !forced && Self::server_hold(s, a).is_none_or(|(_, claim)| claim) {
                        out.push(Action::Renew(w));
                    }
                }
                _ => {}
            }
            if x.phase.waiting() && cfg.cancels && fault {
                out.push(Action::Cancel(w));
            }
        }
    }

    /// What each live client may do: run its releaser, send a heartbeat,
    /// crash, reconnect.
    fn client_actions(&self, s: &State, out: &mut Vec<Action>) {
        let cfg = &self.config;
        let fault = s.faults > 0;
        for c in 0..cfg.clients {
            let cl = &s.clients[usize::from(c)];
            if cl.crashed {
                continue;
            }
            if !cl.pending.is_empty() {
                out.push(Action::Releaser(c));
            }
            let waits = self
                .waiters_of(c)
                .any(|w| s.waiters[usize::from(w)].phase.waiting());
            if waits && cfg.primitive != Primitive::Lock {
                out.push(Action::Heartbeat(c));
            }
            if fault && cfg.crashes {
                out.push(Action::Crash(c));
            }
            if fault && listens(s, cfg, c) {
                out.push(Action::Reconnect(c));
            }
        }
    }

    /// A force-unlock of a held primitive (under faults).
    fn force_unlock_action(&self, s: &State, out: &mut Vec<Action>) {
        let cfg = &self.config;
        let fault = s.faults > 0;
        if fault && cfg.force_unlock && cfg.primitive != Primitive::Semaphore(0) {
            let held = match &s.server {
                Server::Lock(k) => k.hold.is_some(),
                Server::Fair(k) => k.hold.is_some(),
                Server::Sem(_) => false,
            };
            if held {
                out.push(Action::ForceUnlock);
            }
        }
    }

    /// What may happen to each message on its way: delivered to a waiter it
    /// wakes, dropped, lost, duplicated, or aged past its claim.
    fn network_actions(&self, s: &State, out: &mut Vec<Action>) {
        let cfg = &self.config;
        let fault = s.faults > 0;
        for (i, e) in s.net.iter().enumerate() {
            if i > 0 && s.net[i - 1] == *e {
                continue;
            }
            let mut any = false;
            if !s.clients[usize::from(e.to)].crashed {
                for w in self.waiters_of(e.to) {
                    if self.deliverable(s, *e, w) {
                        out.push(Action::Deliver(i, w));
                        any = true;
                    }
                }
                if e.msg == Msg::Forced {
                    any = true;
                    out.push(Action::Deliver(i, e.to * cfg.waiters_per_client));
                }
            }
            if !any {
                out.push(Action::Drop(i));
            }
            if fault {
                out.push(Action::Lose(i));
                if s.net.len() < cfg.max_net {
                    out.push(Action::Duplicate(i));
                }
            }
            if let Msg::Grant {
                attempt,
                token,
                valid: true,
                ..
            } = e.msg
            {
                if cfg.time && Self::server_hold(s, attempt).is_none_or(|(t, _)| t != token) {
                    out.push(Action::AgeGrant(i));
                }
            }
        }
    }

    /// Time passing: a hold's lease or a client's liveness record expires.
    fn time_actions(&self, s: &State, out: &mut Vec<Action>) {
        let cfg = &self.config;
        let fault = s.faults > 0;
        if cfg.time {
            for a in Self::server_holders(s) {
                if fault || !self.lives(s, a) {
                    out.push(Action::Expire(a));
                }
            }
            let alive = match &s.server {
                Server::Fair(k) => k.alive.clone(),
                Server::Sem(k) => k.alive.clone(),
                Server::Lock(_) => Vec::new(),
            };
            for c in alive {
                let dead = s.clients[usize::from(c)].crashed;
                let waits = self
                    .waiters_of(c)
                    .any(|w| s.waiters[usize::from(w)].phase.waiting());
                if dead || !waits || fault {
                    out.push(Action::ExpireAlive(c));
                }
            }
        }
    }
}

/// A fault spends one of the run's fault budget.
fn spend(s: &mut State) {
    s.faults = s.faults.saturating_sub(1);
}

impl Model for GrantModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let cfg = &self.config;
        let server = match cfg.primitive {
            Primitive::Lock => Server::Lock(LockKeys::default()),
            Primitive::Fair => Server::Fair(FairKeys::default()),
            Primitive::Semaphore(_) => Server::Sem(SemKeys::default()),
        };
        vec![State {
            server,
            clients: vec![
                Client {
                    crashed: false,
                    pending: Vec::new(),
                };
                usize::from(cfg.clients)
            ],
            waiters: vec![
                Waiter {
                    round: 0,
                    phase: Phase::Idle,
                    subscribed: false,
                    entry: None,
                    secrets: 0,
                };
                usize::from(cfg.waiters())
            ],
            net: Vec::new(),
            faults: cfg.faults,
            last_taken: 0,
            token_repeat: false,
            forced: Vec::new(),
        }]
    }

    fn actions(&self, s: &State, out: &mut Vec<Action>) {
        self.waiter_actions(s, out);
        self.client_actions(s, out);
        self.force_unlock_action(s, out);
        self.network_actions(s, out);
        self.time_actions(s, out);
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let cfg = &self.config;
        let mut s = last.clone();
        match action {
            Action::Acquire(w) | Action::AcquireLost(w) => {
                self.acquire_step(&mut s, w, matches!(action, Action::AcquireLost(_)));
            }
            Action::Subscribe(w) => {
                let x = &mut s.waiters[usize::from(w)];
                x.subscribed = true;
                x.phase = Phase::Ready;
            }
            Action::Timer(w) => s.waiters[usize::from(w)].phase = Phase::Ready,
            Action::Release(w) | Action::ReleasePassOver(w) => {
                self.release_step(&mut s, w, matches!(action, Action::ReleasePassOver(_)));
            }
            Action::Pass(w, v) => {
                let (from, to) = (Self::attempt(&s, w), Self::attempt(&s, v));
                match lock::pass(&mut s, from, to) {
                    Some(t) => self.take(&mut s, v, t),
                    None => s.waiters[usize::from(v)].phase = Phase::Ready,
                }
                Self::finish(&mut s, w);
            }
            Action::Renew(w) => self.renew_step(&mut s, w),
            Action::Cancel(w) => {
                spend(&mut s);
                let a = Self::attempt(&s, w);
                s.clients[usize::from(cfg.client_of(w))].pending.push(a);
                Self::finish(&mut s, w);
            }
            Action::Releaser(c) => {
                let a = s.clients[usize::from(c)].pending.remove(0);
                self.run_release(&mut s, a, false);
            }
            Action::Heartbeat(c) => match cfg.primitive {
                Primitive::Fair => fair::heartbeat(&mut s, cfg, c),
                Primitive::Semaphore(_) => sem::heartbeat(&mut s, cfg, c),
                Primitive::Lock => {}
            },
            Action::ForceUnlock => {
                spend(&mut s);
                match cfg.primitive {
                    Primitive::Lock => lock::force_unlock(&mut s, cfg),
                    Primitive::Fair => fair::force_unlock(&mut s, cfg),
                    Primitive::Semaphore(_) => {}
                }
            }
            Action::Deliver(i, w) => self.deliver(&mut s, i, w),
            Action::Drop(i) => {
                s.net.remove(i);
            }
            Action::Lose(i) => {
                spend(&mut s);
                s.net.remove(i);
            }
            Action::Duplicate(i) => {
                spend(&mut s);
                let e = s.net[i];
                s.net.push(e);
                s.net.sort();
            }
            Action::Crash(c) => self.crash(&mut s, c),
            Action::Reconnect(c) => self.reconnect(&mut s, c),
            Action::Expire(a) => self.expire(&mut s, a),
            Action::ExpireAlive(c) => {
                let waits = self
                    .waiters_of(c)
                    .any(|w| s.waiters[usize::from(w)].phase.waiting());
                if waits && !s.clients[usize::from(c)].crashed {
                    spend(&mut s);
                }
                match &mut s.server {
                    Server::Fair(k) => k.alive.retain(|&x| x != c),
                    Server::Sem(k) => k.alive.retain(|&x| x != c),
                    Server::Lock(_) => {}
                }
            }
            Action::AgeGrant(i) => {
                if let Msg::Grant { valid, .. } = &mut s.net[i].msg {
                    *valid = false;
                }
                s.net.sort();
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        props::properties()
    }

    fn within_boundary(&self, s: &State) -> bool {
        s.net.len() <= self.config.max_net
    }
}
