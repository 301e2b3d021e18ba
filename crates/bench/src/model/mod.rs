//! The bench's shared data, a leaf: the scenario and contender kinds, the
//! flags, the report's rows, a worker's tally. Nothing here imports another
//! module of the bench (its files import only each other, in the order
//! kinds ← args ← report, tally ← report), so every other module can use
//! it without a circle.

mod args;
mod kinds;
mod report;
mod tally;

pub(crate) use args::require_svg;
pub use args::{parse_duration, parse_ratio, BenchArgs};
pub use kinds::{ContenderKind, ScenarioKind, TOPOLOGY_NAMES_PER_TASK};
pub(crate) use kinds::{MULTI_PARTS, REDLOCK_SERVERS};
pub(crate) use report::{plural, Sweep};
pub use report::{
    Commands, CpuSource, Fairness, HeldNamesStats, HostInfo, Latency, Left, ReadWrite, RedisInfo,
    Report, RunResult, Settings, Skipped, SweepPoint, TopologyInfo, TopologyMeasure, TopologyRow,
    VsStandalone, Work, REPORT_SCHEMA,
};
pub(crate) use tally::{float, Tally};
