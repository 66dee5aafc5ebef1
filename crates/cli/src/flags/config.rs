//! `searchd serve`'s settings from three more places than the command line: a TOML file
//! (`--config FILE`, keys = the long flag names with `_` for `-`), the environment
//! (`SEARCHD_<FLAG>`) and the built-in defaults. Precedence: command line > environment >
//! file > default.
//!
//! The flags stay the one definition: the environment is clap's own `Arg::env` added to
//! every `serve` flag, and the file becomes `--flag=value` arguments for the flags that
//! neither the command line nor the environment set, parsed by clap a second time, so a
//! file's value is converted and checked (value parsers, `requires`, conflicts) exactly as
//! the same flag on the command line. `--print-config` writes the merged settings back as
//! a TOML file documented by the flags' own help.

use std::any::TypeId;
use std::collections::HashSet;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::builder::BoolishValueParser;
use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command, CommandFactory, FromArgMatches};

/// `searchd serve --config FILE` and `--print-config` (flattened into the serve flags).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConfigFileArgs {
    /// TOML file of serve settings, keyed by the long flag names with `_` for `-`
    /// (`max_connections = 100`, `collection = ["a=/x", "/y"]`, `insecure = true`,
    /// `cache_bytes = "64MiB"`). Every flag is also read from the environment as
    /// SEARCHD_<FLAG> (e.g. SEARCHD_MAX_CONNECTIONS). Precedence: command line >
    /// environment > this file > built-in default. `--print-config` writes such a file.
    #[arg(long, env = "SEARCHD_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Print the effective configuration (command line, environment, --config file and
    /// defaults merged) as a TOML file for --config, each setting with its help and secrets
    /// as "<redacted>", and exit without serving.
    #[arg(long)]
    pub print_config: bool,
}

const SERVE: &str = "serve";
const CONFIG: &str = "config";
const PRINT_CONFIG: &str = "print_config";
/// What `--print-config` and the start-up line show instead of a secret.
pub const REDACTED: &str = "<redacted>";

/// Where a setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The command line.
    Flag,
    /// This environment variable.
    Env(String),
    /// The `--config` file.
    File,
    /// The flag's built-in default.
    Default,
    /// Not set anywhere (and no default).
    Unset,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Flag => f.write_str("flag"),
            Source::Env(name) => write!(f, "env {name}"),
            Source::File => f.write_str("file"),
            Source::Default => f.write_str("default"),
            Source::Unset => f.write_str("unset"),
        }
    }
}

/// One `serve` setting as it is in effect.
#[derive(Debug, Clone)]
pub struct Setting {
    /// The file's key: the long flag name with `_` for `-`.
    pub key: String,
    /// `None` when not set (an optional flag without default).
    pub value: Option<toml::Value>,
    pub source: Source,
    /// A secret (a token or key value, not a path): never printed.
    pub secret: bool,
    help: String,
    flag: String,
    env: Option<String>,
    default: Option<String>,
    possible: Vec<String>,
    value_name: String,
}

/// Every `serve` setting in effect, in the order of `serve --help`.
#[derive(Debug, Clone)]
pub struct Effective {
    /// The `--config` file, if any.
    pub file: Option<PathBuf>,
    pub settings: Vec<Setting>,
}

/// `searchd`'s command line, with `serve`'s settings merged from the environment and a
/// `--config` file: the parsed command and, for `serve`, the effective settings.
pub fn parse<C: CommandFactory + FromArgMatches>(
    argv: Vec<OsString>,
) -> Result<(C, Option<Effective>), clap::Error> {
    let base = with_env(C::command());
    let keys: Vec<Arg> = base
        .find_subcommand(SERVE)
        .map(settings)
        .unwrap_or_default();
    let mut cmd = base.clone();
    let first = match cmd.try_get_matches_from_mut(argv.clone()) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::MissingRequiredArgument => {
            // The missing flag may be in the --config file: find the file without the checks
            // (the second parse, with the file's settings, makes them).
            let mut lax = base.clone().ignore_errors(true);
            match lax.try_get_matches_from_mut(argv.clone()) {
                Ok(m)
                    if m.subcommand_matches(SERVE)
                        .is_some_and(|s| s.get_one::<PathBuf>(CONFIG).is_some()) =>
                {
                    cmd = lax;
                    m
                }
                _ => return Err(e),
            }
        }
        Err(e) => return Err(from_env(e, &keys, &argv)),
    };
    let Some(serve) = first.subcommand_matches(SERVE) else {
        return Ok((C::from_arg_matches(&first)?, None));
    };
    let file = serve.get_one::<PathBuf>(CONFIG).cloned();
    let Some(path) = &file else {
        let eff = effective(&keys, serve, &HashSet::new(), None);
        return Ok((C::from_arg_matches(&first)?, Some(eff)));
    };
    let serve_cmd = cmd
        .find_subcommand_mut(SERVE)
        .expect("serve is a subcommand");
    let given: HashSet<&str> = keys
        .iter()
        .map(|a| a.get_id().as_str())
        .filter(|id| {
            matches!(
                serve.value_source(id),
                Some(ValueSource::CommandLine | ValueSource::EnvVariable)
            )
        })
        .collect();
    let table = read_file(path).map_err(|(kind, m)| serve_cmd.error(kind, m))?;
    let (extra, from_file) =
        file_args(&keys, &table, path, &given).map_err(|(kind, m)| serve_cmd.error(kind, m))?;
    let mut argv = argv;
    argv.extend(extra);
    // A check across flags (requires, conflicts, a required flag) failing with the file's
    // settings in: clap's message, saying the file was read.
    let matches = base.try_get_matches_from(argv).map_err(|e| {
        let note = format!("with the settings of config file '{}'", path.display());
        with_note(&e, &note)
    })?;
    let serve = matches.subcommand_matches(SERVE).expect("parsed as serve");
    let eff = effective(&keys, serve, &from_file, Some(path.clone()));
    Ok((C::from_arg_matches(&matches)?, Some(eff)))
}

/// `e`'s message with a note after its first paragraph.
fn with_note(e: &clap::Error, note: &str) -> clap::Error {
    let text = e.render().to_string();
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    let (head, rest) = text.split_once("\n\n").unwrap_or((text, ""));
    clap::Error::raw(e.kind(), format!("{head}\n\n  note: {note}\n\n{rest}"))
}

/// A refused value that came from a `SEARCHD_<FLAG>` variable (not from the command line)
/// says so: clap's message names only the flag.
fn from_env(e: clap::Error, keys: &[Arg], argv: &[OsString]) -> clap::Error {
    use clap::error::{ContextKind, ContextValue};
    if !matches!(
        e.kind(),
        ErrorKind::InvalidValue | ErrorKind::ValueValidation
    ) {
        return e;
    }
    let Some(ContextValue::String(invalid)) = e.get(ContextKind::InvalidArg) else {
        return e;
    };
    let flag = invalid.split([' ', '=']).next().unwrap_or_default();
    let on_command_line = argv.iter().any(|a| {
        let a = a.to_string_lossy();
        a == flag || a.starts_with(&format!("{flag}="))
    });
    let var = keys
        .iter()
        .filter(|a| a.get_long().is_some_and(|l| format!("--{l}") == flag))
        .filter_map(|a| a.get_env())
        .find(|v| std::env::var_os(v).is_some());
    match var {
        Some(v) if !on_command_line => with_note(
            &e,
            &format!(
                "the value comes from environment variable {}",
                v.to_string_lossy()
            ),
        ),
        _ => e,
    }
}

/// `cmd` with every `serve` flag also read from the environment as `SEARCHD_<FLAG>`
/// (a flag that already has another variable, like `QDRANT_API_KEY`, reads that one when
/// `SEARCHD_<FLAG>` is not set), switches taking `true`/`false`/`1`/`0`/`yes`/`no` there,
/// secrets' values hidden in `--help`, and `--index` not required by `--print-config`.
/// Only `serve`'s flags change: the environment never reaches another subcommand.
pub fn with_env(cmd: Command) -> Command {
    cmd.mut_subcommand(SERVE, |serve| {
        serve.mut_args(|a| {
            let Some(long) = a.get_long() else { return a };
            if a.get_id() == PRINT_CONFIG || builtin(&a) {
                return a;
            }
            let name = leak(env_name(long));
            let secret = is_secret(&a);
            // An empty SEARCHD_<FLAG> counts as unset (a cleared or templated variable).
            let value = std::env::var_os(name);
            let empty = value.as_ref().is_some_and(|v| v.is_empty());
            let mut a = match a.get_env() {
                None if !empty => a.env(name),
                Some(_) if value.is_some() && !empty => a.env(name),
                _ => a,
            };
            if matches!(a.get_action(), ArgAction::SetTrue) {
                a = a.value_parser(BoolishValueParser::new());
            }
            if secret {
                a = a.hide_env_values(true);
            }
            if a.get_id() == "index" {
                // (Here rather than with `mut_arg`, which moves the flag to the end.)
                a = a.required_unless_present(PRINT_CONFIG);
            }
            a
        })
    })
}

/// clap (without its `string` feature) names things with `&'static str`: the few names
/// made here live as long as the process anyway.
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// `max-connections` -> `SEARCHD_MAX_CONNECTIONS`.
fn env_name(long: &str) -> String {
    format!("SEARCHD_{}", long.replace('-', "_").to_ascii_uppercase())
}

fn builtin(a: &Arg) -> bool {
    matches!(
        a.get_action(),
        ArgAction::Help | ArgAction::HelpShort | ArgAction::HelpLong | ArgAction::Version
    )
}

/// The flags a file may set: every `serve` flag with a long name but `--config`,
/// `--print-config`, `--help` and the global flags (`--log`, `--log-format`).
fn settings(serve: &Command) -> Vec<Arg> {
    serve
        .get_arguments()
        .filter(|a| {
            a.get_long().is_some()
                && !a.is_global_set()
                && !builtin(a)
                && a.get_id() != CONFIG
                && a.get_id() != PRINT_CONFIG
        })
        .cloned()
        .collect()
}

fn key(a: &Arg) -> String {
    a.get_long().unwrap_or_default().replace('-', "_")
}

fn is_path(a: &Arg) -> bool {
    a.get_value_parser().type_id() == TypeId::of::<PathBuf>()
}

/// A secret: a flag whose environment value `--help` hides (`--admin-token`,
/// `--qdrant-api-key`), or any value (not a path: `--api-keys FILE`, `--tls-key FILE`)
/// named like a token, key, secret or password.
fn is_secret(a: &Arg) -> bool {
    let id = a.get_id().as_str();
    a.is_hide_env_values_set()
        || (["token", "key", "secret", "password"]
            .iter()
            .any(|w| id.contains(w))
            && !is_path(a))
}

fn read_file(path: &Path) -> Result<toml::Table, (ErrorKind, String)> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        (
            ErrorKind::Io,
            format!("cannot read config file '{}': {e}", path.display()),
        )
    })?;
    text.parse::<toml::Table>().map_err(|e| {
        (
            ErrorKind::InvalidValue,
            format!(
                "config file '{}' is not valid TOML: {}",
                path.display(),
                e.to_string().trim_end()
            ),
        )
    })
}

/// The file's settings as `--flag=value` arguments, for the flags not in `given` (set on
/// the command line or in the environment), and the ids of the flags they set. Every key
/// is checked, used or not: unknown keys, values of the wrong type and values the flag's
/// parser refuses are errors naming the key and the file.
fn file_args(
    keys: &[Arg],
    table: &toml::Table,
    path: &Path,
    given: &HashSet<&str>,
) -> Result<(Vec<OsString>, HashSet<String>), (ErrorKind, String)> {
    let file = path.display();
    let mut args = Vec::new();
    let mut set = HashSet::new();
    for (k, v) in table {
        if k == CONFIG || k == PRINT_CONFIG {
            return Err((
                ErrorKind::UnknownArgument,
                format!(
                    "`{k}` cannot be set in config file '{file}' (it is a command-line flag only)"
                ),
            ));
        }
        let Some(arg) = keys.iter().find(|a| key(a) == *k) else {
            let mut msg = format!("unknown key `{k}` in config file '{file}'");
            let names: Vec<String> = keys.iter().map(key).collect();
            if let Some(s) = closest(k, &names) {
                let _ = write!(msg, "\n\n  tip: a similar key exists: `{s}`");
            }
            return Err((ErrorKind::UnknownArgument, msg));
        };
        let wrong = |want: &str| {
            (
                ErrorKind::InvalidValue,
                format!(
                    "`{k}` in config file '{file}' must be {want}, not {} {v}",
                    article(v.type_str())
                ),
            )
        };
        let long = arg.get_long().unwrap_or_default();
        let values: Vec<String> = match arg.get_action() {
            ArgAction::SetTrue => match v {
                toml::Value::Boolean(true) => vec![String::new()],
                toml::Value::Boolean(false) => vec![],
                _ => return Err(wrong("true or false")),
            },
            ArgAction::Append => match v {
                toml::Value::Array(items) => items
                    .iter()
                    .map(|x| scalar(x).ok_or_else(|| wrong("a list of strings")))
                    .collect::<Result<_, _>>()?,
                x => vec![scalar(x).ok_or_else(|| wrong("a list of strings"))?],
            },
            _ => vec![scalar(v).ok_or_else(|| wrong("a string or a number"))?],
        };
        for x in &values {
            if is_secret(arg) && x == REDACTED {
                return Err((
                    ErrorKind::InvalidValue,
                    format!(
                        "`{k}` in config file '{file}' is \"{REDACTED}\": write the secret in \
                         (or set it with --{long} or {})",
                        env_name(long)
                    ),
                ));
            }
            if !matches!(arg.get_action(), ArgAction::SetTrue) {
                check_value(arg, x).map_err(|e| {
                    (
                        ErrorKind::InvalidValue,
                        format!("`{k}` in config file '{file}': {e}"),
                    )
                })?;
            }
        }
        if given.contains(arg.get_id().as_str()) {
            continue;
        }
        set.insert(arg.get_id().to_string());
        for x in values {
            args.push(match arg.get_action() {
                ArgAction::SetTrue => format!("--{long}").into(),
                _ => format!("--{long}={x}").into(),
            });
        }
    }
    Ok((args, set))
}

fn article(t: &str) -> String {
    match t.chars().next() {
        Some('a' | 'e' | 'i' | 'o' | 'u') => format!("an {t}"),
        _ => format!("a {t}"),
    }
}

/// A TOML scalar as the command line would spell it.
fn scalar(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

/// `value` through `arg`'s own value parser (clap's message when it refuses it).
fn check_value(arg: &Arg, value: &str) -> Result<(), String> {
    let long = arg.get_long().unwrap_or_default();
    let mut one = Arg::new("v")
        .long(leak(long.to_string()))
        .value_parser(arg.get_value_parser().clone())
        .action(ArgAction::Set);
    if let Some(names) = arg.get_value_names() {
        one = one.value_names(names.to_vec());
    }
    Command::new("config")
        .no_binary_name(true)
        .disable_help_flag(true)
        .arg(one)
        .try_get_matches_from([format!("--{long}={value}")])
        .map(|_| ())
        .map_err(|e| {
            let text = e.render().to_string();
            let text = text.strip_prefix("error: ").unwrap_or(&text);
            text.split("\n\n").next().unwrap_or(text).trim().to_string()
        })
}

/// The known name nearest to `name` (edit distance), if near enough to be a typo.
fn closest<'a>(name: &str, names: &'a [String]) -> Option<&'a str> {
    let norm = name.replace('-', "_").to_ascii_lowercase();
    names
        .iter()
        .map(|n| (distance(&norm, n), n))
        .filter(|(d, n)| *d <= (n.len() / 3).max(2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, n)| n.as_str())
}

fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The settings in effect after the (final) parse of `serve`.
fn effective(
    keys: &[Arg],
    m: &ArgMatches,
    from_file: &HashSet<String>,
    file: Option<PathBuf>,
) -> Effective {
    let settings = keys
        .iter()
        .map(|a| {
            let id = a.get_id().as_str();
            let value = match a.get_action() {
                ArgAction::SetTrue => Some(toml::Value::Boolean(m.get_flag(id))),
                ArgAction::Append => Some(toml::Value::Array(
                    m.get_raw(id)
                        .into_iter()
                        .flatten()
                        .map(|v| toml::Value::String(v.to_string_lossy().into_owned()))
                        .collect(),
                )),
                _ => m
                    .get_raw(id)
                    .and_then(|mut r| r.next())
                    .map(|v| typed(a, &v.to_string_lossy())),
            };
            let source = if from_file.contains(id) {
                Source::File
            } else {
                match m.value_source(id) {
                    Some(ValueSource::CommandLine) => Source::Flag,
                    Some(ValueSource::EnvVariable) => Source::Env(
                        a.get_env()
                            .map(|e| e.to_string_lossy().into_owned())
                            .unwrap_or_default(),
                    ),
                    Some(ValueSource::DefaultValue) => Source::Default,
                    _ => Source::Unset,
                }
            };
            let help = a
                .get_long_help()
                .or(a.get_help())
                .map(|h| h.to_string())
                .unwrap_or_default();
            Setting {
                key: key(a),
                value,
                source,
                secret: is_secret(a),
                help,
                flag: format!("--{}", a.get_long().unwrap_or_default()),
                env: a.get_env().map(|e| e.to_string_lossy().into_owned()),
                default: Some(
                    a.get_default_values()
                        .iter()
                        .map(|v| v.to_string_lossy())
                        .collect::<Vec<_>>()
                        .join(","),
                )
                .filter(|d| !d.is_empty()),
                possible: a
                    .get_possible_values()
                    .iter()
                    .filter(|p| !p.is_hide_set())
                    .map(|p| p.get_name().to_string())
                    .collect(),
                value_name: a
                    .get_value_names()
                    .and_then(|n| n.first())
                    .map(|n| n.to_string())
                    .unwrap_or_else(|| "VALUE".into()),
            }
        })
        .collect();
    Effective { file, settings }
}

/// A raw value as a TOML integer or float when its flag takes a number and it is spelled
/// as one, else a string ("64MiB", paths, names).
fn typed(a: &Arg, raw: &str) -> toml::Value {
    let t = a.get_value_parser().type_id();
    let ints = [
        TypeId::of::<usize>(),
        TypeId::of::<u64>(),
        TypeId::of::<u32>(),
        TypeId::of::<u16>(),
        TypeId::of::<u8>(),
        TypeId::of::<isize>(),
        TypeId::of::<i64>(),
        TypeId::of::<i32>(),
    ];
    if ints.iter().any(|i| t == *i) {
        if let Ok(i) = raw.parse::<i64>() {
            return toml::Value::Integer(i);
        }
    }
    if t == TypeId::of::<f64>() || t == TypeId::of::<f32>() {
        if let Ok(f) = raw.parse::<f64>() {
            if f.is_finite() {
                return toml::Value::Float(f);
            }
        }
    }
    toml::Value::String(raw.to_string())
}

impl Setting {
    /// The value as TOML, `"<redacted>"` for a secret.
    fn shown(&self) -> Option<String> {
        let v = self.value.as_ref()?;
        Some(if self.secret {
            toml::Value::String(REDACTED.into()).to_string()
        } else {
            v.to_string()
        })
    }
}

impl Effective {
    /// Every setting not at its default, with where it came from, secrets redacted:
    /// `index="/x" (flag), max_connections=100 (file), admin_token="<redacted>" (env
    /// SEARCHD_ADMIN_TOKEN)`.
    pub fn summary(&self) -> String {
        let parts: Vec<String> = self
            .settings
            .iter()
            .filter(|s| !matches!(s.source, Source::Default | Source::Unset))
            .filter_map(|s| Some(format!("{}={} ({})", s.key, s.shown()?, s.source)))
            .collect();
        let mut out = parts.join(", ");
        if let Some(f) = &self.file {
            let _ = write!(out, "; config file {}", f.display());
        }
        out
    }

    /// The whole configuration as a TOML file for `--config`: every setting, its help as
    /// comments above it, unset ones commented out, secrets as `"<redacted>"`.
    pub fn to_toml(&self) -> String {
        let mut out = String::new();
        out.push_str(
            "# searchd serve configuration: `searchd serve --config FILE` (or SEARCHD_CONFIG=FILE).\n\
             # Keys are the long flag names with `_` for `-`. Precedence: command line >\n\
             # environment (SEARCHD_<FLAG>) > this file > built-in default. Secrets are printed\n\
             # as \"<redacted>\": write them in (or leave them to the environment and delete the\n\
             # line) before using this file. Settings at their default and settings not set are\n\
             # commented out. Relative paths are relative to the working directory.\n",
        );
        if let Some(f) = &self.file {
            let _ = writeln!(out, "# Read from config file {}.", f.display());
        }
        for s in &self.settings {
            out.push('\n');
            let mut help = s.help.trim_end().to_string();
            if !help.is_empty() && !help.ends_with(['.', ':', '?', '!']) {
                help.push('.');
            }
            for paragraph in help.split("\n\n") {
                for line in wrap(paragraph, 86) {
                    let _ = writeln!(out, "# {line}");
                }
            }
            let mut about = s.flag.clone();
            if let Some(env) = &s.env {
                let _ = write!(about, ", {env}");
            }
            if !s.possible.is_empty() {
                let _ = write!(about, "; one of {}", s.possible.join(", "));
            }
            if let Some(d) = &s.default {
                let _ = write!(about, "; default {d}");
            }
            if !matches!(s.source, Source::Default | Source::Unset) {
                let _ = write!(about, "; set by {}", s.source);
            }
            let _ = writeln!(out, "# ({about})");
            match s.shown() {
                // A default is printed commented out: given explicitly it could trip a
                // `requires` (`cache_ttl_s` needs `cache_bytes`) and would pin today's default.
                Some(v) if matches!(s.source, Source::Default | Source::Unset) => {
                    let _ = writeln!(out, "# {} = {v}", s.key);
                }
                Some(v) => {
                    let _ = writeln!(out, "{} = {v}", s.key);
                }
                None => {
                    let _ = writeln!(out, "# {} = <{}>   (not set)", s.key, s.value_name);
                }
            }
        }
        out
    }

    /// The setting with this key.
    #[cfg(test)]
    pub fn get(&self, key: &str) -> Option<&Setting> {
        self.settings.iter().find(|s| s.key == key)
    }
}

/// `text`'s words in lines of at most `width` characters (longer words alone).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests;
