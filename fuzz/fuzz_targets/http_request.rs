//! The request head of the Prometheus endpoint (`[metrics] listen`), which
//! anyone who can reach the port may send.
//!
//! Input: the bytes of a request head.
//!
//! Checks: the parser answers or refuses, never panics; what it accepts is
//! a GET or HEAD of `/metrics` over HTTP/1.0 or 1.1, valid UTF-8; OpenMetrics
//! is chosen only for a head whose `Accept` names it, and then with a
//! weight above 0 (`q`, any case: ABNF literals are case-insensitive);
//! named without any weight, it is chosen.
#![no_main]

use heron_server::http::{Format, parse_request};
use libfuzzer_sys::fuzz_target;

/// How the `Accept` headers of `head` weigh `application/openmetrics-text`:
/// `None` if no range names it, else whether one names it without a zero
/// weight, and whether one names it with no weight at all.
fn open_metrics_ranges(head: &str) -> Option<(bool, bool)> {
    let headers = head.split('\n').skip(1).map(|l| l.trim_end_matches('\r'));
    let values = headers
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_once(':'))
        .filter(|(name, _)| name.eq_ignore_ascii_case("accept"))
        .flat_map(|(_, value)| value.split(','));
    let mut named = None;
    for range in values {
        let mut params = range.split(';').map(str::trim);
        if !params
            .next()
            .unwrap()
            .eq_ignore_ascii_case("application/openmetrics-text")
        {
            continue;
        }
        let weights: Vec<&str> = params
            .filter(|p| {
                p.get(..2)
                    .is_some_and(|name| name.eq_ignore_ascii_case("q="))
            })
            .map(|p| &p[2..])
            .collect();
        let zero = weights
            .iter()
            .any(|q| q.parse::<f32>().is_ok_and(|q| q <= 0.0));
        let (not_refused, unweighted) = named.unwrap_or((false, false));
        named = Some((not_refused || !zero, unweighted || weights.is_empty()));
    }
    named
}

fuzz_target!(|data: &[u8]| {
    if let Ok(wanted) = parse_request(data) {
        let text = std::str::from_utf8(data).expect("accepted heads are UTF-8");
        let method = if wanted.head_only { "HEAD " } else { "GET " };
        assert!(text.starts_with(method), "{text:?}");
        let line = text.split('\n').next().unwrap().trim_end_matches('\r');
        assert!(line.contains(" /metrics"), "{line:?}");
        assert!(
            line.ends_with("HTTP/1.0") || line.ends_with("HTTP/1.1"),
            "{line:?}"
        );
        let ranges = open_metrics_ranges(text);
        if wanted.format == Format::OpenMetrics {
            assert!(
                ranges.is_some_and(|(not_refused, _)| not_refused),
                "{text:?}"
            );
        } else {
            assert!(
                !ranges.is_some_and(|(_, unweighted)| unweighted),
                "{text:?}"
            );
        }
    }
});
