//! An exhaustive interleaving model of the waiting engine's notifier (the
//! slot protocol of `crates/core/src/wait.rs`): every schedule of a waiter,
//! a second waiter that may be cancelled, a releasing holder and the
//! engine's message delivery, checked for lost wake-ups; and broken
//! variants of the protocol, each of which the check must catch.
//!
//! loom cannot run the real code (it uses `parking_lot` and
//! `tokio::sync::Notify`), so the protocol is restated here as small atomic
//! steps, each tagged with the line of `wait.rs` (or `acquire.rs`) it stands
//! for. Line numbers are those of the commit this file was written against;
//! the function names are the stable reference.
//!
//! The state graph is explored depth first with memoisation: every state is
//! expanded once, and the number of complete schedules (interleavings) from
//! each state is the sum over its successors, so all interleavings are
//! covered (and counted) without walking each one separately. The property
//! is checked in every terminal state (no actor can move): the waiter `W`
//! must not be asleep while the lock is free. In the real code such a
//! waiter sleeps until its deadline (the old holder's TTL, or the caller's
//! time left): a lost wake-up.

use std::collections::{HashMap, HashSet};

/// Slot index of `C`, the waiter that may be cancelled. It registered
/// first, so it is the longest-waiting one and the release's single
/// wake-up goes to it first (`wait.rs:447 wake_any` walks the slots in
/// registration order).
const C: usize = 0;
/// Slot index of `W`, the waiter whose wake-up must not be lost.
const W: usize = 1;
const NAMES: [&str; 2] = ["C", "W"];

/// One removed or reordered step of the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mutation {
    /// The protocol as written.
    None,
    /// `Notify` that only wakes a task already asleep (no stored permit,
    /// as `notify_waiters`), instead of `notify_one` (`wait.rs:329`).
    NoPermit,
    /// The flag is cleared after the try instead of before it
    /// (`begin_try`, `wait.rs:929`, moved behind the try).
    ClearAfterTry,
    /// A waiter that leaves does not pass its wake-up on
    /// (`wait.rs:1018-1024` removed).
    NoPassOn,
    /// A wake-up only notifies; the pending flag is not set
    /// (`wait.rs:328` removed).
    WakeWithoutFlag,
    /// `wait` does not look at the flag; it returns when the `Notify`
    /// fires (`wait.rs:938` removed).
    NoFlagCheck,
    /// The protocol before `Slot::woken`: a wake-up taken by `wait` is
    /// forgotten, so a waiter that leaves before its next try is answered
    /// passes nothing on (the gap this model found).
    NoWokenFlag,
}

/// Where the cancellable waiter `C` may leave.
#[derive(Debug, Clone, Copy)]
struct Cancel {
    /// While asleep in `wait` (the `select!` at `wait.rs:945` is an await
    /// point: the acquire future may be dropped there).
    asleep: bool,
    /// While its try is in flight (`once(...).await` in acquire.rs), the
    /// request already sent: it still lands on the server; if it takes the
    /// lock, the armed attempt's release (acquire.rs `Attempt::drop`, the
    /// releaser) frees it again and publishes.
    in_try: bool,
    /// After `wait` returned `Notified` and before its next try reached the
    /// server: out of time at the deadline check before `begin_try`
    /// (acquire.rs: `if deadline.is_some_and(..) { break }`), or dropped
    /// before the try's request was written.
    after_wake: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Pc {
    /// Next: `begin_try` (`wait.rs:929`, `pending.store(false)`).
    BeginTry,
    /// Next: the try. The acquire script runs atomically on the server:
    /// one step that takes the lock if it is free.
    Try,
    /// Only with [`Mutation::ClearAfterTry`]: the flag is cleared here.
    ClearLate,
    /// Next: the top of `wait`'s loop (`wait.rs:938`,
    /// `pending.swap(false)`; true returns `Woke::Notified`).
    Check,
    /// Next: the first poll of `notify.notified()` (`wait.rs:946`):
    /// consumes a stored permit, or registers the task and sleeps.
    Park,
    /// Registered with the `Notify`, asleep until `notify_one` picks it.
    Asleep,
    /// `W` holds the lock (`mark_acquired`, `wait.rs:998`): done.
    Holds,
    /// `Subscription::drop` (`wait.rs:1002`), first step under the table
    /// lock: remove the slot (`wait.rs:1009`), read the flag
    /// (`wait.rs:1018`) and pick whom to pass the wake-up to
    /// (`wait.rs:1024` → `wake_any` → `unnamed`, `wait.rs:454`).
    Drop1,
    /// Passing on, `Slot::wake` of the target: store its flag (`wait.rs:328`).
    Drop2(usize),
    /// Passing on: `notify_one` of the target (`wait.rs:329`); table unlocked.
    Drop3(usize),
    /// Left.
    Gone,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Waiter {
    pc: Pc,
    /// `Slot::pending`.
    pending: bool,
    /// `Slot::woken`: a wake-up taken by `wait`, no try answered since.
    woken: bool,
    /// `Slot::acquired`.
    acquired: bool,
    /// The slot is in the channel's table (`Channel::slots`).
    in_table: bool,
    /// `Notify`'s stored permit.
    permit: bool,
    /// A `Notified` future of this waiter is registered with the `Notify`.
    registered: bool,
    /// `notify_one` picked the registered future (it completes when polled).
    notified: bool,
    /// The waiter was cancelled (or gave up) before acquiring.
    cancelled: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Lock {
    /// The holder `H` (not yet released).
    Holder,
    Free,
    /// Held by waiter `0` or `1`.
    Waiter(usize),
    /// Taken by a cancelled waiter's try that landed after it left: held
    /// under an attempt nobody waits for, until the releaser frees it.
    Orphan,
}

/// The engine's delivery of one message (`Shared::deliver`, `wait.rs:389`),
/// which runs under the table lock (`wait.rs:393`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Delivery {
    Idle,
    /// `wake_any` picked this slot (`wait.rs:400`, `wait.rs:447-454`:
    /// the first unnamed slot whose flag is clear); next, `Slot::wake`
    /// stores its flag (`wait.rs:328`).
    Picked(usize),
    /// Flag stored; next `notify_one` (`wait.rs:329`), then the table is
    /// unlocked.
    Stored(usize),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct State {
    w: [Waiter; 2],
    lock: Lock,
    /// Messages published (`PUBLISH` in a release script) and not yet
    /// handed to `deliver` by the subscriber connection.
    msgs: u8,
    delivery: Delivery,
    /// The table's mutex is held (by the delivery or by a `Drop`).
    table_locked: bool,
    /// A cancelled waiter's try is on its way to the server.
    in_flight: bool,
}

/// What the exploration found from one state.
#[derive(Debug, Clone)]
struct Outcome {
    /// Complete schedules from this state.
    schedules: u128,
    /// The shortest schedule from this state to a lost wake-up, if any.
    counterexample: Option<Vec<String>>,
}

struct Model {
    mutation: Mutation,
    cancel: Cancel,
    memo: HashMap<State, Outcome>,
    on_path: HashSet<State>,
    /// Transitions that store `W`'s flag after its try failed and before it
    /// sleeps (the window the "no lost wake-up" claim is about).
    window_hits: u64,
    /// Transitions that cancel `C` while it holds an unused wake-up.
    cancelled_while_woken: u64,
}

/// The model's verdict on one configuration.
#[derive(Debug)]
struct Report {
    interleavings: u128,
    states: usize,
    window_hits: u64,
    cancelled_while_woken: u64,
    counterexample: Option<Vec<String>>,
}

fn check(mutation: Mutation, cancel: Cancel) -> Report {
    let waiter = Waiter {
        pc: Pc::BeginTry,
        pending: false,
        woken: false,
        acquired: false,
        in_table: true,
        permit: false,
        registered: false,
        notified: false,
        cancelled: false,
    };
    let start = State {
        w: [waiter.clone(), waiter],
        lock: Lock::Holder,
        msgs: 0,
        delivery: Delivery::Idle,
        table_locked: false,
        in_flight: false,
    };
    let mut m = Model {
        mutation,
        cancel,
        memo: HashMap::new(),
        on_path: HashSet::new(),
        window_hits: 0,
        cancelled_while_woken: 0,
    };
    let out = m.explore(&start);
    Report {
        interleavings: out.schedules,
        states: m.memo.len(),
        window_hits: m.window_hits,
        cancelled_while_woken: m.cancelled_while_woken,
        counterexample: out.counterexample,
    }
}

impl Model {
    fn explore(&mut self, s: &State) -> Outcome {
        if let Some(o) = self.memo.get(s) {
            return o.clone();
        }
        assert!(
            self.on_path.insert(s.clone()),
            "the model has a cycle at {s:?}"
        );
        let next = self.successors(s);
        let out = if next.is_empty() {
            Outcome {
                schedules: 1,
                counterexample: lost_wake_up(s).then(Vec::new),
            }
        } else {
            let mut schedules = 0u128;
            let mut best: Option<Vec<String>> = None;
            for (label, t) in next {
                let o = self.explore(&t);
                schedules += o.schedules;
                if let Some(mut trace) = o.counterexample {
                    if best.as_ref().is_none_or(|b| trace.len() + 1 < b.len()) {
                        trace.insert(0, label);
                        best = Some(trace);
                    }
                }
            }
            Outcome {
                schedules,
                counterexample: best,
            }
        };
        self.on_path.remove(s);
        self.memo.insert(s.clone(), out.clone());
        out
    }

    /// `Slot::wake` split in its two steps; the first stores the flag
    /// (`wait.rs:328`). Returns the step's label (after the target's name).
    fn store_flag(&mut self, s: &mut State, target: usize) -> &'static str {
        if target == W && matches!(s.w[W].pc, Pc::Check | Pc::Park | Pc::ClearLate) {
            self.window_hits += 1;
        }
        if self.mutation == Mutation::WakeWithoutFlag {
            ".pending not set"
        } else {
            s.w[target].pending = true;
            ".pending = true"
        }
    }

    /// `notify_one` (`wait.rs:329`): wakes the registered `Notified`, or
    /// stores the permit (at most one) when none is registered.
    fn notify_one(&self, s: &mut State, target: usize) {
        let t = &mut s.w[target];
        if t.registered && !t.notified {
            t.notified = true;
        } else if self.mutation != Mutation::NoPermit {
            t.permit = true;
        }
    }

    /// `wake_any(ch, 1, ..)` → `unnamed` (`wait.rs:447-454`): the first
    /// slot in the table whose flag is clear (both waiters are unnamed and
    /// of one class).
    fn pick(s: &State) -> Option<usize> {
        (0..2).find(|&i| s.w[i].in_table && !s.w[i].pending)
    }

    /// Every enabled step, with its label.
    fn successors(&mut self, s: &State) -> Vec<(String, State)> {
        let mut out = Vec::new();

        // The holder's release: lock_release.lua publishes and deletes the
        // key in one atomic script.
        if s.lock == Lock::Holder {
            let mut t = s.clone();
            t.lock = Lock::Free;
            t.msgs += 1;
            out.push(("H: release (DEL + PUBLISH)".to_string(), t));
        }

        // A cancelled waiter's try that was already sent lands.
        if s.in_flight {
            let mut t = s.clone();
            t.in_flight = false;
            let label = if t.lock == Lock::Free {
                t.lock = Lock::Orphan;
                "server: C's cancelled try lands and takes the free lock"
            } else {
                "server: C's cancelled try lands, finds the lock busy"
            };
            out.push((label.to_string(), t));
        }

        // The releaser runs the orphaned attempt's release (lock_release
        // finds the hold, deletes it and publishes). Submitted by
        // `Attempt::drop`, which runs after the subscription's drop.
        if s.lock == Lock::Orphan && s.w[C].pc == Pc::Gone {
            let mut t = s.clone();
            t.lock = Lock::Free;
            t.msgs += 1;
            out.push((
                "releaser: releases C's orphaned attempt (DEL + PUBLISH)".to_string(),
                t,
            ));
        }

        // The engine's delivery of the next message.
        match s.delivery {
            Delivery::Idle if s.msgs > 0 && !s.table_locked => {
                let mut t = s.clone();
                t.msgs -= 1;
                let label = match Self::pick(&t) {
                    Some(i) => {
                        t.table_locked = true;
                        t.delivery = Delivery::Picked(i);
                        format!("E: deliver, table locked, wake_any picks {}", NAMES[i])
                    }
                    None => "E: deliver, no waiter with a clear flag: nothing to do".to_string(),
                };
                out.push((label, t));
            }
            Delivery::Idle => {}
            Delivery::Picked(i) => {
                let mut t = s.clone();
                let label = self.store_flag(&mut t, i);
                t.delivery = Delivery::Stored(i);
                out.push((format!("E: {}{label}", NAMES[i]), t));
            }
            Delivery::Stored(i) => {
                let mut t = s.clone();
                self.notify_one(&mut t, i);
                t.delivery = Delivery::Idle;
                t.table_locked = false;
                out.push((format!("E: {}.notify_one, table unlocked", NAMES[i]), t));
            }
        }

        for i in [C, W] {
            self.waiter_steps(s, i, &mut out);
        }
        out
    }

    fn waiter_steps(&mut self, s: &State, i: usize, out: &mut Vec<(String, State)>) {
        let n = NAMES[i];
        let me = &s.w[i];
        let may_cancel = i == C && !me.cancelled;
        match me.pc {
            Pc::BeginTry => {
                let mut t = s.clone();
                if self.mutation == Mutation::ClearAfterTry {
                    t.w[i].pc = Pc::Try;
                    out.push((format!("{n}: (no begin_try before the try)"), t));
                } else {
                    t.w[i].pending = false;
                    t.w[i].pc = Pc::Try;
                    out.push((format!("{n}: begin_try, pending = false"), t));
                }
                if may_cancel && self.cancel.after_wake {
                    let mut t = s.clone();
                    self.leave(&mut t, i, false);
                    out.push((format!("{n}: leaves before its next try is sent"), t));
                }
            }
            Pc::Try => {
                let mut t = s.clone();
                if t.lock == Lock::Free {
                    t.lock = Lock::Waiter(i);
                    // mark_acquired (wait.rs:998); C's acquire then returns
                    // and its subscription drops (no pass-on: acquired).
                    t.w[i].acquired = true;
                    t.w[i].pc = if i == W { Pc::Holds } else { Pc::Drop1 };
                    out.push((format!("{n}: try takes the lock, mark_acquired"), t));
                } else {
                    // The answer came: `Subscription::tried` (acquire.rs).
                    t.w[i].woken = false;
                    t.w[i].pc = if self.mutation == Mutation::ClearAfterTry {
                        Pc::ClearLate
                    } else {
                        Pc::Check
                    };
                    out.push((format!("{n}: try fails (busy)"), t));
                }
                if may_cancel && self.cancel.in_try {
                    let mut t = s.clone();
                    self.leave(&mut t, i, true);
                    out.push((format!("{n}: cancelled, its try in flight"), t));
                }
            }
            Pc::ClearLate => {
                let mut t = s.clone();
                t.w[i].pending = false;
                t.w[i].pc = Pc::Check;
                out.push((format!("{n}: late begin_try, pending = false"), t));
            }
            Pc::Check => {
                let mut t = s.clone();
                if self.mutation == Mutation::NoFlagCheck {
                    t.w[i].pc = Pc::Park;
                    out.push((format!("{n}: wait (no flag check)"), t));
                } else if t.w[i].pending {
                    t.w[i].pending = false;
                    t.w[i].woken = self.mutation != Mutation::NoWokenFlag;
                    t.w[i].pc = Pc::BeginTry;
                    out.push((format!("{n}: wait sees pending, returns Notified"), t));
                } else {
                    t.w[i].pc = Pc::Park;
                    out.push((format!("{n}: wait sees no pending"), t));
                }
            }
            Pc::Park => {
                let mut t = s.clone();
                if t.w[i].permit {
                    t.w[i].permit = false;
                    t.w[i].pc = self.after_notified();
                    out.push((format!("{n}: notified() takes the stored permit"), t));
                } else {
                    t.w[i].registered = true;
                    t.w[i].pc = Pc::Asleep;
                    out.push((format!("{n}: notified() registers, sleeps"), t));
                }
            }
            Pc::Asleep => {
                if me.notified {
                    let mut t = s.clone();
                    t.w[i].notified = false;
                    t.w[i].registered = false;
                    t.w[i].pc = self.after_notified();
                    out.push((format!("{n}: woken by notify_one"), t));
                }
                if may_cancel && self.cancel.asleep {
                    let mut t = s.clone();
                    self.leave(&mut t, i, false);
                    out.push((format!("{n}: cancelled while asleep"), t));
                }
            }
            Pc::Drop1 if !s.table_locked => {
                let mut t = s.clone();
                t.w[i].in_table = false;
                let other_left = (0..2).any(|j| t.w[j].in_table);
                let woken = t.w[i].pending || t.w[i].woken;
                let pass =
                    other_left && woken && !t.w[i].acquired && self.mutation != Mutation::NoPassOn;
                match pass.then(|| Self::pick(&t)).flatten() {
                    Some(j) => {
                        t.table_locked = true;
                        t.w[i].pc = Pc::Drop2(j);
                        out.push((
                            format!(
                                "{n}: drop, table locked, passes its wake-up to {}",
                                NAMES[j]
                            ),
                            t,
                        ));
                    }
                    None => {
                        t.w[i].pc = Pc::Gone;
                        let what = if woken && !t.w[i].acquired {
                            "drop with a pending wake-up, passes nothing on"
                        } else {
                            "drop, nothing to pass on"
                        };
                        out.push((format!("{n}: {what}"), t));
                    }
                }
            }
            Pc::Drop2(j) => {
                let mut t = s.clone();
                let label = self.store_flag(&mut t, j);
                t.w[i].pc = Pc::Drop3(j);
                out.push((format!("{n}: pass-on, {}{label}", NAMES[j]), t));
            }
            Pc::Drop3(j) => {
                let mut t = s.clone();
                self.notify_one(&mut t, j);
                t.table_locked = false;
                t.w[i].pc = Pc::Gone;
                out.push((
                    format!("{n}: pass-on, {}.notify_one, table unlocked", NAMES[j]),
                    t,
                ));
            }
            Pc::Drop1 | Pc::Holds | Pc::Gone => {}
        }
    }

    /// Where a completed `notified()` leads: back to the flag check at the
    /// top of `wait`'s loop, or (without the check) out of `wait` as
    /// `Notified`.
    fn after_notified(&self) -> Pc {
        if self.mutation == Mutation::NoFlagCheck {
            Pc::BeginTry
        } else {
            Pc::Check
        }
    }

    /// The acquire future of waiter `i` is dropped (or gives up): its
    /// subscription drops next; a try already sent still lands.
    fn leave(&mut self, t: &mut State, i: usize, try_sent: bool) {
        if t.w[i].pending {
            self.cancelled_while_woken += 1;
        }
        let w = &mut t.w[i];
        w.cancelled = true;
        // A dropped `Notified` that was picked forwards its notification;
        // the slot goes away with it, so nothing is kept.
        w.registered = false;
        w.notified = false;
        w.pc = Pc::Drop1;
        t.in_flight = try_sent;
    }
}

/// The property, in a terminal state: `W` asleep while the lock is free
/// means nothing will ever wake it (it would sleep to its deadline).
fn lost_wake_up(s: &State) -> bool {
    s.w[W].pc == Pc::Asleep && s.lock == Lock::Free
}

const CANCEL: Cancel = Cancel {
    asleep: true,
    in_try: true,
    after_wake: true,
};

fn show(trace: &[String]) -> String {
    trace
        .iter()
        .enumerate()
        .map(|(k, l)| format!("  {:>2}. {l}\n", k + 1))
        .collect()
}

/// The protocol as written: no schedule loses `W`'s wake-up, with `C`
/// never cancelled, cancelled while asleep, cancelled with its try in
/// flight, or both. The window the claim is about is exercised (a wake-up
/// lands between `W`'s failed try and its sleep), and so is a cancellation
/// of `C` holding an unused wake-up.
#[test]
fn no_interleaving_loses_a_wake_up() {
    let configs = [
        Cancel {
            asleep: false,
            in_try: false,
            after_wake: false,
        },
        Cancel {
            asleep: true,
            in_try: false,
            after_wake: false,
        },
        Cancel {
            asleep: false,
            in_try: true,
            after_wake: false,
        },
        CANCEL,
    ];
    for cancel in configs {
        let r = check(Mutation::None, cancel);
        println!(
            "{cancel:?}: {} interleavings, {} states, {} window hits, {} cancellations with a pending wake-up",
            r.interleavings, r.states, r.window_hits, r.cancelled_while_woken
        );
        if let Some(t) = &r.counterexample {
            panic!("{cancel:?}: lost wake-up:\n{}", show(t));
        }
        assert!(r.window_hits > 0, "{cancel:?}: the window is never hit");
        if cancel.asleep {
            assert!(
                r.cancelled_while_woken > 0,
                "{cancel:?}: never cancelled while woken"
            );
        }
    }
}

/// Each broken protocol is caught: the check returns a counterexample.
/// Each runs with the cancellations that show its flaw most plainly.
#[test]
fn each_broken_notifier_is_caught() {
    const NO_CANCEL: Cancel = Cancel {
        asleep: false,
        in_try: false,
        after_wake: false,
    };
    const CANCEL_ASLEEP: Cancel = Cancel {
        asleep: true,
        in_try: false,
        after_wake: false,
    };
    for (mutation, cancel, must_show) in [
        // A wake-up lands after a flag check and before the task
        // registers: without a stored permit nothing wakes it.
        (
            Mutation::NoPermit,
            NO_CANCEL,
            "E: C.notify_one, table unlocked",
        ),
        // The wake-up lands after the failed try; the late clear erases it
        // and the permit only leads back to a clear flag.
        (
            Mutation::ClearAfterTry,
            NO_CANCEL,
            "C: late begin_try, pending = false",
        ),
        // C was picked, is cancelled holding the only wake-up, and keeps it.
        (
            Mutation::NoPassOn,
            CANCEL_ASLEEP,
            "C: drop with a pending wake-up, passes nothing on",
        ),
        // The notify wakes C, which finds no flag and sleeps again.
        (
            Mutation::WakeWithoutFlag,
            NO_CANCEL,
            "C: notified() takes the stored permit",
        ),
    ] {
        let r = check(mutation, cancel);
        let trace = r
            .counterexample
            .unwrap_or_else(|| panic!("{mutation:?} is not caught"));
        println!(
            "{mutation:?}, {cancel:?}: counterexample ({} interleavings explored):\n{}",
            r.interleavings,
            show(&trace)
        );
        assert!(
            trace.iter().any(|l| l == must_show),
            "{mutation:?}: the counterexample lacks {must_show:?}:\n{}",
            show(&trace)
        );
        assert_eq!(
            trace.last().map(String::as_str),
            Some("W: notified() registers, sleeps"),
            "{mutation:?}: the counterexample ends with W asleep"
        );
        // The same flaw shows with every cancellation allowed.
        assert!(
            check(mutation, CANCEL).counterexample.is_some(),
            "{mutation:?} is not caught with cancellations"
        );
    }
}

/// Without the flag check at the top of `wait` no wake-up is lost either:
/// it is `notify_one`'s stored permit that covers the moment between the
/// failed try and the sleep. The check's role is to filter stale permits
/// (a wake-up that landed before `begin_try`, which the try observed
/// anyway), which costs an extra try, not a lost wake-up. So the variant
/// that removes the check is not a counterexample; the ones above are.
#[test]
fn without_the_flag_check_the_permit_still_covers_the_window() {
    let r = check(Mutation::NoFlagCheck, CANCEL);
    if let Some(t) = &r.counterexample {
        panic!("lost wake-up:\n{}", show(t));
    }
}

/// The gap this model found (issue 23): `wait` clears the flag when it
/// returns `Notified`, so a waiter that was woken and leaves before its
/// next try is answered (out of time at the acquire loop's deadline check,
/// or dropped before the request is written) passed nothing on, and the
/// other waiter slept to its own bound. `Slot::woken` keeps such a wake-up
/// until a try is answered; the protocol without it is caught.
#[test]
fn a_waiter_leaving_after_wait_returned_passes_the_wake_up_on() {
    let after_wake = Cancel {
        asleep: false,
        in_try: false,
        after_wake: true,
    };
    if let Some(t) = check(Mutation::None, after_wake).counterexample {
        panic!("lost wake-up:\n{}", show(&t));
    }
    let trace = check(Mutation::NoWokenFlag, after_wake)
        .counterexample
        .expect("the protocol without Slot::woken is caught");
    println!("counterexample without Slot::woken:\n{}", show(&trace));
    assert!(trace
        .iter()
        .any(|l| l == "C: wait sees pending, returns Notified"));
    assert!(trace
        .iter()
        .any(|l| l == "C: leaves before its next try is sent"));
}
