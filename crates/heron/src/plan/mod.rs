//! What a configuration or a reload means, decided before anything
//! running is touched: which zone files changed (`zone_files`: stamps,
//! loading, the outcome a reload reports), what a catalog consumer's new
//! version asks for (`consumer`) and what a produced catalog holds
//! (`catalog_producer`). Reads `config`; the runtime carries it out.

pub mod catalog_producer;
pub mod consumer;
pub mod key_notes;
pub mod key_state;
pub mod rollover;
pub mod signing;
pub mod zone_files;
pub(crate) mod zonemd;
