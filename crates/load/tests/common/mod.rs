//! A `LoadConfig` from `searchd load`-style flag pairs, for tests that read best as flags.
//! The library takes no flags (the binary parses them: `crates/cli/src/flags/load.rs`);
//! this sets the same fields through the library's own value parsers.

use std::path::PathBuf;

use searchd_load::config::{
    parse_duration, parse_endpoint, parse_pick, parse_query_count, parse_ramp, parse_rate,
    parse_rates,
};
use searchd_load::mix::parse_mix;
use searchd_load::{CacheMode, LoadConfig, RetryAfter};

/// `LoadConfig::new(url)` with `flags` applied (`--flag value`, or `--flag` alone for a
/// switch); a value the flag's parser refuses is that parser's message.
pub fn config(url: &str, flags: &[&str]) -> Result<LoadConfig, String> {
    let mut c = LoadConfig::new(url);
    let mut it = flags.iter().copied();
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        let num = |v: &str| -> Result<f64, String> { v.parse().map_err(|_| format!("{flag} {v}")) };
        match flag {
            "--url" => c.url = value()?.to_string(),
            "--quiet" => c.quiet = true,
            "--fail-on-slo" => c.fail_on_slo = true,
            "--threads" => c.threads = Some(num(value()?)? as usize),
            "--warmup" => c.warmup = parse_duration(value()?)?,
            "--duration" => c.duration = parse_duration(value()?)?,
            "--request-timeout" => c.request_timeout = parse_duration(value()?)?,
            "--ramp" => c.ramp = parse_ramp(value()?)?,
            "--rate" => c.rate = Some(parse_rate(value()?)?),
            "--rate-ramp" => c.rate_ramp = Some(parse_rates(value()?)?),
            "--endpoint" => c.endpoint = parse_endpoint(value()?)?,
            "--queries" | "--query-count" => c.query_count = parse_query_count(value()?)?,
            "--pick" => c.pick = parse_pick(value()?)?,
            "--slo-p99-ms" => c.slo_p99_ms = num(value()?)?,
            "--max-error-rate" => c.max_error_rate = num(value()?)?,
            "--k" => c.k = num(value()?)? as u32,
            "--trials" => c.trials = num(value()?)? as u32,
            "--connections" => c.connections = num(value()?)? as usize,
            "--server-pid" => c.server_pid = Some(num(value()?)? as u32),
            "--gt" => c.gt = Some(PathBuf::from(value()?)),
            "--json" => c.json = Some(PathBuf::from(value()?)),
            "--csv" => c.csv = Some(PathBuf::from(value()?)),
            "--html" => c.html = Some(PathBuf::from(value()?)),
            "--body-file" => c.body_file = Some(PathBuf::from(value()?)),
            "--text-queries" => c.text_queries = Some(PathBuf::from(value()?)),
            "--mix" => c.mix = Some(parse_mix(value()?)?),
            "--cache" => {
                c.cache = Some(match value()? {
                    "cold" => CacheMode::Cold,
                    "warm" => CacheMode::Warm,
                    v => return Err(format!("--cache {v}")),
                })
            }
            "--retry-after" => {
                c.retry_after = match value()? {
                    "ignore" => RetryAfter::Ignore,
                    "honor" => RetryAfter::Honor,
                    v => return Err(format!("--retry-after {v}")),
                }
            }
            other => return Err(format!("the test helper does not know {other}")),
        }
    }
    Ok(c)
}

/// [`config`] for a test run: quiet, two client threads, short steps unless `extra` sets
/// `--warmup` / `--duration` (`warmup` and `duration` are the defaults).
pub fn args(url: &str, extra: &[&str], warmup: &str, duration: &str) -> LoadConfig {
    let mut v = vec!["--quiet", "--threads", "2"];
    for (flag, default) in [("--warmup", warmup), ("--duration", duration)] {
        if !extra.contains(&flag) {
            v.extend([flag, default]);
        }
    }
    v.extend_from_slice(extra);
    config(url, &v).unwrap()
}
