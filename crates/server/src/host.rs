//! The `Host` check against DNS rebinding. A server without API keys trusts whoever can
//! reach it (by default only this machine). A web page can still reach it through the
//! browser: its name first resolves to the page's server, then (rebinding) to 127.0.0.1,
//! and the browser sends the page's requests to searchd as same-origin requests, with
//! the page's name in `Host`. So without keys a request must name this server: a loopback
//! name (`localhost`, `*.localhost`), an IP address (a rebinding attack needs a DNS name
//! the attacker controls), or a name given with `serve --allow-host` (`*`: any). With API
//! keys there is no check: a page cannot know a key. `/health` and `/ready` are always
//! answered. A request without `Host` (HTTP/1.0) is not from a browser and passes.

/// Whether a request whose `Host` header is `host` may be served (see the module docs).
/// Called for every request of a server without keys: compares in place, allocates nothing.
pub(crate) fn allowed(host: Option<&[u8]>, extra: &[String]) -> bool {
    let Some(raw) = host else {
        return true;
    };
    let Ok(host) = std::str::from_utf8(raw) else {
        return false;
    };
    let host = host.trim();
    let name = strip_port(host);
    if name.is_empty() {
        return false;
    }
    let ends_with_ci = |s: &str, suffix: &str| {
        s.len() >= suffix.len()
            && s.as_bytes()[s.len() - suffix.len()..].eq_ignore_ascii_case(suffix.as_bytes())
    };
    if name.eq_ignore_ascii_case("localhost") || ends_with_ci(name, ".localhost") {
        return true;
    }
    let bare = name.trim_start_matches('[').trim_end_matches(']');
    if bare.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    extra.iter().any(|a| {
        let a = a.trim();
        a == "*"
            || a.eq_ignore_ascii_case(host)
            || a.trim_end_matches('.')
                .eq_ignore_ascii_case(name.trim_end_matches('.'))
    })
}

/// `name` of `name:port` / `[v6]:port` (a bare IPv6 address has colons of its own).
fn strip_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return match rest.find(']') {
            Some(end) => &host[..end + 2],
            None => host,
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            name
        }
        _ => host,
    }
}

/// The refusal's message.
pub(crate) fn refusal(host: Option<&[u8]>) -> String {
    let shown = host.map_or_else(String::new, |h| String::from_utf8_lossy(h).into_owned());
    format!(
        "Host {shown:?} is not this server's: without --api-keys only loopback names, IP addresses and names given with --allow-host are served (a web page could otherwise reach this server by DNS rebinding)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(h: &str, extra: &[&str]) -> bool {
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        allowed(Some(h.as_bytes()), &extra)
    }

    #[test]
    fn loopback_names_and_addresses_pass() {
        for h in [
            "localhost",
            "localhost:8080",
            "LOCALHOST:1",
            "app.localhost:9",
            "127.0.0.1",
            "127.0.0.1:8080",
            "[::1]:8080",
            "[::1]",
            "10.1.2.3:80",
            "::1",
        ] {
            assert!(ok(h, &[]), "{h}");
        }
        assert!(allowed(None, &[]));
    }

    #[test]
    fn other_names_need_allow_host() {
        for h in [
            "evil.example",
            "evil.example:8080",
            "x",
            "localhost.evil.example",
            "",
        ] {
            assert!(!ok(h, &[]), "{h}");
        }
        assert!(ok("search.internal:8080", &["search.internal"]));
        assert!(ok("search.internal:8080", &["search.internal:8080"]));
        assert!(!ok("search.internal:9090", &["search.internal:8080"]));
        assert!(ok("anything.example", &["*"]));
        assert!(!allowed(Some(b"\xff\xfe"), &[]));
    }
}
