//! What one model run covers: the primitive, the actors, the faults and
//! the mutation.

/// The primitive whose scripts are modelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Primitive {
    /// lua/lock: lock_acquire, lock_release, lock_pass, lock_force_unlock.
    Lock,
    /// lua/fair: fair_acquire, fair_release, fair_heartbeat, fair_force_unlock.
    Fair,
    /// lua/semaphore: sem_acquire, sem_release, sem_heartbeat, sem_renew,
    /// with this many permits (every request is for one).
    Semaphore(u8),
}

/// A deliberate bug, to show that the properties catch it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mutation {
    /// The scripts as they are.
    None,
    /// lock_release.lua before d5b954d: a grant published to the
    /// longest-waiting client whose PUBLISH counted no receiver (and whose
    /// registration was older than its claim, taken as possible at any
    /// time) is taken back, and the next client is granted with the same
    /// token.
    PassOverUnheard,
    /// The release scripts (lock_release, fair_release, sem_release)
    /// write what they write but publish nothing.
    ReleaseForgetsToPublish,
}

/// One model run.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    /// The primitive.
    pub primitive: Primitive,
    /// Clients.
    pub clients: u8,
    /// Waiters of each client.
    pub waiters_per_client: u8,
    /// Acquires each waiter makes, one after another.
    pub rounds: u8,
    /// Fault steps allowed in one run (see [`crate::State::faults`]).
    pub faults: u8,
    /// Leases, claims and liveness records may run out with
    /// time; off for the no-lost-wake-up check.
    pub time: bool,
    /// Clients may crash (a fault).
    pub crashes: bool,
    /// Waiters may cancel (a fault: an acquire dropped mid-wait).
    pub cancels: bool,
    /// force-unlock steps are taken.
    pub force_unlock: bool,
    /// This client subscribes at a replica: it hears every message through
    /// replication, and no PUBLISH counts it.
    pub replica_client: Option<u8>,
    /// Most messages in flight at once (states beyond are not explored).
    pub max_net: usize,
    /// The mutation.
    pub mutation: Mutation,
}

impl Config {
    /// The configuration of the invariants: faults and time on, 2 clients
    /// with one waiter each making 2 acquires (a semaphore: 2 waiters each,
    /// one acquire, so that they contend for its permits).
    pub fn safety(primitive: Primitive) -> Config {
        let sem = matches!(primitive, Primitive::Semaphore(_));
        Config {
            primitive,
            clients: 2,
            waiters_per_client: if sem { 2 } else { 1 },
            rounds: if sem { 1 } else { 2 },
            faults: 2,
            time: true,
            crashes: true,
            cancels: true,
            force_unlock: true,
            replica_client: Some(1),
            max_net: 3,
            mutation: Mutation::None,
        }
    }

    /// The configuration of the no-lost-wake-up check: no faults, no time
    /// running out, one acquire per waiter.
    pub fn liveness(primitive: Primitive) -> Config {
        Config {
            primitive,
            clients: 2,
            waiters_per_client: 2,
            rounds: 1,
            faults: 0,
            time: false,
            crashes: false,
            cancels: false,
            force_unlock: false,
            replica_client: Some(1),
            max_net: 4,
            mutation: Mutation::None,
        }
    }

    /// The same configuration with `mutation`.
    pub fn with(mut self, mutation: Mutation) -> Config {
        self.mutation = mutation;
        self
    }

    /// The client of waiter `w`.
    pub fn client_of(&self, w: u8) -> u8 {
        w / self.waiters_per_client
    }

    /// How many waiters.
    pub fn waiters(&self) -> u8 {
        self.clients * self.waiters_per_client
    }
}
