//! Asking the CPU to fetch memory that is about to be read: the
//! instructions are `heron_sys::prefetch`'s (the system-call crate, where raw
//! pointer code is allowed); they inline to one instruction at each call site.

pub(crate) use heron_sys::prefetch::{prefetch, prefetch_lines, prefetch_next_line};
