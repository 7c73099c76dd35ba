//! `heron-bench report` renders README.md and the charts from a small
//! results.json (tests/fixtures/results.json: figures of a full run, cut
//! down to four workloads and three servers, with one failed run added).

use std::path::PathBuf;
use std::process::Command;

fn render() -> (String, PathBuf) {
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results.json");
    let out = std::env::temp_dir().join(format!("heron-bench-report-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let status = Command::new(env!("CARGO_BIN_EXE_heron-bench"))
        .arg("report")
        .arg("--results")
        .arg(&fixture)
        .arg("--out")
        .arg(&out)
        .status()
        .expect("run heron-bench report");
    assert!(status.success());
    let readme = std::fs::read_to_string(out.join("README.md")).unwrap();
    (readme, out)
}

#[test]
fn the_report_has_every_section_with_the_figures_of_the_results() {
    let (readme, out) = render();
    let sections = [
        "# Benchmarks",
        "## How to run",
        "## Machine",
        "## Method",
        "## Environment check: the generator's ceiling",
        "## Targets",
        "### What limits it",
        "### Paired comparisons",
        "## Capacity: answered queries per server CPU-second, CPU capped at 40%",
        "## Uncapped: highest rate answered with at most 0.1% loss",
        "## Latency at 20k queries/s, uncapped",
        "## Startup, memory and CPU time",
        "## Idle TCP connections",
        "## Changing a large zone",
        "## Reloading a large zone under load",
        "## Errors",
        "## Notes from the runs",
    ];
    let mut at = 0;
    for heading in sections {
        let line = format!("\n{heading}\n");
        let found = readme[at..]
            .find(&line)
            .or_else(|| readme.starts_with(&line[1..]).then_some(0))
            .unwrap_or_else(|| panic!("no {heading} after byte {at}"));
        at += found + 1;
    }
    let figures = [
        // The paired median ratio settles the target, the separate runs
        // are its detail.
        "| root: Heron ≥ 0.9× reflector | 0.893 | ≥ 0.90 | **FAIL** | paired trials: median of 60 pairs",
        "| big: Heron startup ≤ 0.5× best peer | 0.175 | ≤ 0.50 | PASS |",
        // Capacity: median (min–max) per server, the failed BIND run,
        // and Heron's ratios to the reflector and to the best peer.
        "| root | 273k (273k–284k) | 261k (260k–285k) | – | 194k (186k–211k) | error | 0.95 | 1.34 (Knot) |",
        "| root | Heron | 0.04 (0.04–0.05) | 7.9 | 6.4 | 19.8 |",
        "| Heron root | reflector root | 60 | 0.893 | 0.757..1.080 |",
        "Time: 0.43 ms median (0.36–0.49)",
        "* BIND on root: BIND did not answer within 900 s\n",
        "* big: Heron large zone within 5% of the small zone: measured 0.939. The same ratio (big / small zone) in the separate runs: reflector 1.03, Heron 1.01, Knot 0.68; Heron keeps more of its small-zone rate than any peer.",
        "![capacity by server and workload](capacity.svg)",
        "[results.json](results.json).\n",
    ];
    for figure in figures {
        assert!(readme.contains(figure), "missing: {figure}");
    }
    assert!(
        !readme.contains("second line"),
        "only an error's first line"
    );
    assert!(!readme.contains("{{"), "a placeholder left unfilled");
    assert!(!readme.contains("<!--"), "a template marker in the page");
    for chart in ["capacity.svg", "answered.svg"] {
        let svg = std::fs::read_to_string(out.join(chart)).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("Heron"), "{chart}");
    }
    let _ = std::fs::remove_dir_all(&out);
}
