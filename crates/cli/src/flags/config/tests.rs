//! Unit tests of `serve`'s settings from a file and the environment, on a command shaped
//! like `searchd`'s (a global flag with a variable, `serve`, another subcommand).

use super::*;
use crate::flags::serve::ServeArgs;
use searchd_server::ServeSettings;

#[derive(clap::Parser, Debug)]
#[command(name = "searchd")]
struct Cli {
    #[command(subcommand)]
    cmd: Sub,
    /// Log filter.
    #[arg(long, global = true, env = "SEARCHD_LOG", default_value = "info")]
    log: String,
}

#[derive(clap::Subcommand, Debug)]
enum Sub {
    Serve(Box<ServeArgs>),
    /// Another subcommand with a flag of the same name as one of serve's.
    Other {
        #[arg(long)]
        timeout_ms: Option<u64>,
    },
}

/// `searchd serve ARGS` with `file` (if any) as `--config`.
fn run(args: &[&str], file: Option<&str>) -> Result<(ServeArgs, Effective), clap::Error> {
    let dir = tempfile::tempdir().unwrap();
    let mut argv: Vec<OsString> = vec!["searchd".into(), "serve".into()];
    if let Some(text) = file {
        let p = dir.path().join("searchd.toml");
        std::fs::write(&p, text).unwrap();
        argv.push("--config".into());
        argv.push(p.into());
    }
    argv.extend(args.iter().map(OsString::from));
    let (cli, eff) = parse::<Cli>(argv)?;
    match cli.cmd {
        Sub::Serve(a) => Ok((*a, eff.expect("serve has settings"))),
        other => panic!("{other:?}"),
    }
}

fn settings_of(args: &[&str], file: Option<&str>) -> ServeSettings {
    run(args, file).unwrap().0.settings()
}

fn err(args: &[&str], file: &str) -> String {
    let e = run(args, Some(file)).expect_err("should be refused");
    assert_eq!(e.exit_code(), 2, "{e}");
    e.render().to_string()
}

#[test]
fn the_file_sets_what_the_command_line_does_not() {
    let file = r#"
        index = "/from-file"
        max_connections = 100
        timeout_ms = 50
        collection = ["a=/x", "/y"]
        insecure = true
        populate = false
        cache_bytes = "64MiB"
        cache_ttl_s = 9
        io_nice = -3
        vacuum_ratio = 0.5
        vectors = "ram"
        dynamic_mapping = false
        max_pending_bytes = 1048576
    "#;
    let (args, eff) = run(&["--timeout-ms", "7", "--collection", "/cli"], Some(file)).unwrap();
    let s = args.settings();
    assert_eq!(s.index.as_deref(), Some(Path::new("/from-file")));
    assert_eq!(s.max_connections, 100);
    assert_eq!(s.timeout_ms, 7, "the command line wins");
    assert_eq!(
        s.collection,
        vec!["/cli"],
        "a repeatable flag is replaced, not appended"
    );
    assert!(s.insecure && !s.populate);
    assert_eq!((s.cache_bytes, s.cache_ttl_s), (Some(64 << 20), 9));
    assert_eq!(s.io_nice, -3);
    assert_eq!(s.vacuum_ratio, 0.5);
    assert_eq!(s.vectors, searchd_engine::VectorPlacement::Ram);
    assert_eq!(s.dynamic_mapping, "false");
    assert_eq!(s.max_pending_bytes, 1 << 20);
    let src = |k: &str| eff.get(k).unwrap().source.clone();
    assert_eq!(src("max_connections"), Source::File);
    assert_eq!(src("timeout_ms"), Source::Flag);
    assert_eq!(src("collection"), Source::Flag);
    assert_eq!(src("ef"), Source::Default);
    assert_eq!(src("model"), Source::Unset);
    let line = eff.summary();
    assert!(line.contains("max_connections=100 (file)"), "{line}");
    assert!(line.contains("timeout_ms=7 (flag)"), "{line}");
    assert!(!line.contains("ef="), "defaults are not listed: {line}");
}

#[test]
fn a_required_flag_may_come_from_the_file_and_checks_still_run() {
    assert!(run(&[], None).is_err(), "nothing to serve");
    let s = settings_of(&[], Some("collection = \"/only\""));
    assert_eq!(
        s.collection,
        vec!["/only"],
        "a single value for a repeatable flag"
    );
    // `--cache-ttl-s` requires `--cache-bytes`, wherever each comes from.
    let e = err(&[], "index = \"/x\"\ncache_ttl_s = 5");
    assert!(
        e.contains("--cache-bytes") && e.contains("searchd.toml"),
        "{e}"
    );
    let s = settings_of(
        &["--cache-ttl-s", "5"],
        Some("index = \"/x\"\ncache_bytes = 1000"),
    );
    assert_eq!((s.cache_bytes, s.cache_ttl_s), (Some(1000), 5));
}

#[test]
fn unknown_keys_and_wrong_types_name_the_key_and_the_file() {
    let e = err(&["--index", "/x"], "max_conections = 100");
    assert!(
        e.contains("unknown key `max_conections`") && e.contains("searchd.toml"),
        "{e}"
    );
    assert!(e.contains("a similar key exists: `max_connections`"), "{e}");
    assert!(e.contains("Usage:"), "a clap-style usage error: {e}");
    let e = err(&["--index", "/x"], "max-connections = 100");
    assert!(e.contains("`max_connections`"), "{e}");
    for (file, needle) in [
        ("max_connections = \"lots\"", "invalid value 'lots'"),
        (
            "max_connections = [1, 2]",
            "must be a string or a number, not an array",
        ),
        ("insecure = \"yes\"", "must be true or false"),
        ("collection = [[1]]", "must be a list of strings"),
        ("vectors = \"floppy\"", "invalid value 'floppy'"),
        ("cache_bytes = \"12 parsecs\"", "cache_bytes"),
        ("addr = { host = \"x\" }", "not a table"),
    ] {
        let e = err(&["--index", "/x"], file);
        let key = file.split(' ').next().unwrap();
        assert!(
            e.contains(&format!("`{key}`")) && e.contains("searchd.toml") && e.contains(needle),
            "{file}: {e}"
        );
    }
    // A bad value is an error even where the command line overrides it.
    let e = err(&["--index", "/x", "--ef", "10"], "ef = \"many\"");
    assert!(e.contains("`ef`"), "{e}");
    let e = err(&["--index", "/x"], "config = \"other.toml\"");
    assert!(e.contains("`config` cannot be set"), "{e}");
    let e = err(&["--index", "/x"], "this is not toml");
    assert!(e.contains("not valid TOML"), "{e}");
    let e = run(&["--config", "/nonexistent/searchd.toml"], None).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("/nonexistent/searchd.toml"), "{e}");
}

#[test]
fn print_config_round_trips_with_secrets_filled_in() {
    let args = [
        "--index",
        "/x",
        "--collection",
        "a=/c",
        "--collection",
        "/d",
        "--max-connections",
        "77",
        "--admin-token",
        "s3cret-token",
        "--qdrant-api-key",
        "qk-123",
        "--api-keys",
        "/etc/keys.toml",
        "--cache-bytes",
        "1MiB",
        "--io-nice=-2",
        "--oversample",
        "2.5",
        "--insecure",
        "--graph",
        "ram",
        "--print-config",
    ];
    let (a, eff) = run(&args, None).unwrap();
    assert!(a.config_file.print_config);
    let text = eff.to_toml();
    assert!(
        !text.contains("s3cret") && !text.contains("qk-123"),
        "{text}"
    );
    assert!(text.contains("admin_token = \"<redacted>\""), "{text}");
    assert!(
        text.contains("api_keys = \"/etc/keys.toml\""),
        "paths are not secrets"
    );
    assert!(text.contains("max_connections = 77"), "{text}");
    assert!(
        text.contains("# model = <DIR>"),
        "unset settings are commented out"
    );
    assert!(
        text.contains("# Most connections open at once."),
        "help above the key"
    );
    assert!(
        !text.contains("\nconfig =") && !text.contains("print_config"),
        "{text}"
    );
    for s in &eff.settings {
        assert!(
            text.contains(&format!("\n{} = ", s.key)) || text.contains(&format!("# {} = ", s.key))
        );
    }
    // Back through --config: refused while a secret is "<redacted>" ...
    let e = err(&[], &text);
    assert!(
        e.contains("`admin_token`") && e.contains("<redacted>"),
        "{e}"
    );
    // ... and the same settings with them written in.
    let filled = text
        .replace(
            "admin_token = \"<redacted>\"",
            "admin_token = \"s3cret-token\"",
        )
        .replace(
            "qdrant_api_key = \"<redacted>\"",
            "qdrant_api_key = \"qk-123\"",
        );
    let (b, eff2) = run(&[], Some(&filled)).unwrap();
    assert!(!b.config_file.print_config);
    assert_eq!(b.settings(), a.settings());
    assert!(eff2
        .settings
        .iter()
        .all(|s| matches!(s.source, Source::File | Source::Default | Source::Unset)));
    assert_eq!(eff2.get("max_connections").unwrap().source, Source::File);
    assert!(
        text.contains("\n# cache_ttl_s = 60\n"),
        "defaults are commented out"
    );
    // `--print-config` needs nothing else, not even something to serve.
    let (_, eff3) = run(&["--print-config"], None).unwrap();
    assert!(eff3.to_toml().contains("# index = <DIR>"));
    assert!(eff3.to_toml().contains("\n# collection = []\n"));
    let order: Vec<&str> = eff3
        .settings
        .iter()
        .map(|s| s.key.as_str())
        .take(3)
        .collect();
    assert_eq!(
        order,
        ["index", "collection", "backend"],
        "the order of --help"
    );
    // The defaults alone round-trip too.
    let d = eff3.to_toml();
    assert_eq!(
        settings_of(&["--index", "/x"], Some(&d)),
        settings_of(&["--index", "/x"], None)
    );
}

#[test]
fn secrets_are_tokens_and_keys_but_not_paths() {
    let cmd = with_env(Cli::command());
    let serve = cmd.find_subcommand(SERVE).unwrap();
    let secret: Vec<String> = settings(serve)
        .iter()
        .filter(|a| is_secret(a))
        .map(key)
        .collect();
    assert_eq!(secret, ["qdrant_api_key", "cache_redis", "admin_token"]);
    for a in settings(serve) {
        assert!(
            a.get_env().is_some(),
            "{} has no environment variable",
            key(&a)
        );
    }
    let env = |k: &str| {
        settings(serve)
            .into_iter()
            .find(|a| key(a) == k)
            .and_then(|a| a.get_env().map(|e| e.to_string_lossy().into_owned()))
            .unwrap()
    };
    assert_eq!(env("max_connections"), "SEARCHD_MAX_CONNECTIONS");
    assert_eq!(env("api_keys"), "SEARCHD_API_KEYS");
    // Other subcommands read no SEARCHD_ variable of serve's.
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != SERVE) {
        for a in sub.get_arguments() {
            let e = a.get_env().map(|e| e.to_string_lossy().into_owned());
            assert!(e.is_none(), "{} --{:?}", sub.get_name(), a.get_long());
        }
    }
    assert!(
        settings(serve).iter().all(|a| a.get_id() != "log"),
        "global flags are not serve's settings"
    );
    let argv = ["searchd", "other", "--timeout-ms", "5", "--log", "warn"];
    let (cli, eff) = parse::<Cli>(argv.iter().map(OsString::from).collect()).unwrap();
    assert!(eff.is_none(), "settings are serve's only");
    assert_eq!(cli.log, "warn");
    match cli.cmd {
        Sub::Other { timeout_ms } => assert_eq!(timeout_ms, Some(5)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn typos_find_the_nearest_key() {
    let names: Vec<String> = ["max_connections", "timeout_ms", "threads"]
        .map(String::from)
        .to_vec();
    assert_eq!(closest("timeout", &names), Some("timeout_ms"));
    assert_eq!(closest("max-connections", &names), Some("max_connections"));
    assert_eq!(closest("thread", &names), Some("threads"));
    assert_eq!(closest("colour", &names), None);
    assert_eq!(distance("kitten", "sitting"), 3);
}
