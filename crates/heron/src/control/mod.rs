//! What operators and monitoring use to see and drive the running
//! server: the control socket and its JSON protocol (`socket`), what each
//! command does (`commands`), the `heron ctl` client (`ctl`) and the
//! Prometheus endpoint (`metrics`). Above the runtime, which it reads.

pub mod commands;
pub mod ctl;
pub mod keys;
pub mod metrics;
pub mod socket;
