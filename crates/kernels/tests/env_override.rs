//! `SEARCHD_KERNELS` is read once, when the first kernel call picks the implementation, so
//! each check runs this test binary again as a child process with the variable set and asks
//! it (through the ignored `child_report` test) which implementation it picked.

use searchd_kernels::{Backend, ENV_OVERRIDE};
use std::process::Command;

/// Runs `child_report` in a fresh process with `SEARCHD_KERNELS=value` (or unset) and
/// returns the implementation it reported.
fn implementation_with(value: Option<&str>) -> String {
    let mut cmd = Command::new(std::env::current_exe().expect("test binary path"));
    cmd.args([
        "--exact",
        "child_report",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ]);
    match value {
        Some(v) => cmd.env(ENV_OVERRIDE, v),
        None => cmd.env_remove(ENV_OVERRIDE),
    };
    let out = cmd.output().expect("run child test process");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The harness prints "test child_report ... " on the same line before our output.
    stdout
        .lines()
        .find_map(|l| l.split_once("IMPLEMENTATION=").map(|(_, v)| v))
        .unwrap_or_else(|| panic!("no report in child output: {stdout}"))
        .trim()
        .to_string()
}

#[test]
fn env_override_forces_scalar() {
    assert_eq!(implementation_with(Some("scalar")), "scalar");
}

#[test]
fn env_override_auto_and_unset_pick_the_best() {
    let best = Backend::available()[0].name();
    assert_eq!(implementation_with(None), best);
    assert_eq!(implementation_with(Some("auto")), best);
    // Unknown names fall back to the best path (with a warning on stderr).
    assert_eq!(implementation_with(Some("no-such-path")), best);
}

#[test]
fn env_override_selects_each_available_path() {
    for be in Backend::available() {
        assert_eq!(implementation_with(Some(be.name())), be.name());
    }
}

/// Not a test by itself: the child half of the tests above.
#[test]
#[ignore = "run as a child process by the env_override tests"]
fn child_report() {
    // Use a kernel first, so the report is what the hot path really dispatched to.
    let a: Vec<f32> = (0..100).map(|i| i as f32).collect();
    let d = searchd_kernels::dot(&a, &a);
    assert!((d - 328_350.0).abs() < 1.0);
    println!("IMPLEMENTATION={}", searchd_kernels::implementation());
}
