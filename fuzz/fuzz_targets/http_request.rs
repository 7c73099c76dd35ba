//! The request head of the Prometheus endpoint (`[metrics] listen`), which
//! anyone who can reach the port may send.
//!
//! Input: the bytes of a request head.
//!
//! Checks: the parser answers or refuses, never panics; what it accepts is
//! a GET or HEAD of `/metrics` over HTTP/1.0 or 1.1, valid UTF-8; OpenMetrics
//! is chosen only for a head whose `Accept` names it.
#![no_main]

use heron_server::http::parse_request;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(wanted) = parse_request(data) {
        let text = std::str::from_utf8(data).expect("accepted heads are UTF-8");
        let method = if wanted.head_only { "HEAD " } else { "GET " };
        assert!(text.starts_with(method), "{text:?}");
        let line = text.split('\n').next().unwrap();
        assert!(line.contains(" /metrics"), "{line:?}");
        assert!(line.trim_end_matches('\r').ends_with("HTTP/1.0") || line.trim_end_matches('\r').ends_with("HTTP/1.1"));
        // OpenMetrics only for a head that names it.
        if wanted.format == heron_server::http::Format::OpenMetrics {
            assert!(text.to_ascii_lowercase().contains("application/openmetrics-text"), "{text:?}");
        }
    }
});
