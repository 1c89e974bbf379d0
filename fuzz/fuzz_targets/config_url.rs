//! URL and option parsing: `Config::from_url`, `Config::set` with any key and value, `validate`.
//!
//! Four shapes of input (structured, from `arbitrary`):
//! - `Raw`: any text as a URL. An accepted config validates, its `Debug` and `redacted_url` do
//!   not depend on the passwords, and its redacted URL parses back to the same sentinels.
//! - `Built`: a URL written from parts with everything percent-encoded as RFC 3986 asks (any
//!   user, password and service text, valid hosts, any option keys and values). It must parse to
//!   exactly the config those parts make through `Config::set` and `validate` (same error text
//!   when one of them refuses), and the error text must be the same whatever the password.
//! - `Sloppy`: passwords written raw the way people paste them (base64 with `/ + =`, and the
//!   other characters userinfo and query values may carry unencoded), with the letters G J K Q V W
//!   Y Z reserved to passwords (no other part and no error template has them). Whatever the
//!   parser makes of it: an error text, a config's `Debug` and its redacted URL never show one of
//!   those letters, and an accepted config holds exactly the given passwords.
//! - `Options`: `Config::set` with any key and value, direct edits of sentinels and service, then
//!   `validate`. A refused `set` changes nothing; an accepted config meets every invariant
//!   `validate` promises; `Debug` does not depend on the passwords.
#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use sentinel_recovery::{Address, Config, Credentials, ErrorCode, Secret};

/// Everything but RFC 3986's unreserved characters.
const ENCODE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

const KEYS: &[&str] = &[
    "db",
    "client_name",
    "protocol",
    "connect_timeout_ms",
    "command_timeout_ms",
    "sentinel_timeout_ms",
    "check_interval_ms",
    "retry_base_ms",
    "retry_max_ms",
    "dns_timeout_ms",
    "queue_size",
    "sentinel_events",
    "dns_server",
    "read_from",
    "sentinel_user",
    "sentinel_password",
    "username",
    "user",
    "password",
    "tls",
    "sentinel_tls",
    "data_tls",
    "tls_insecure",
    "tls_ca_file",
    "tls_cert_file",
    "tls_key_file",
    "sentinel_tls_ca_file",
    "sentinel_tls_cert_file",
    "sentinel_tls_key_file",
    "tls_server_name",
];

/// Letters that only passwords carry in `Sloppy` inputs.
const MARKERS: &[u8] = b"GJKQVWYZ";

#[derive(Arbitrary, Debug)]
enum Input {
    Raw(String),
    Built(Built),
    Sloppy(Sloppy),
    Options(Vec<Op>),
}

#[derive(Arbitrary, Debug)]
struct Built {
    scheme: u8,
    user: Option<String>,
    password: Option<String>,
    other_password: String,
    hosts: Vec<Host>,
    service: String,
    options: Vec<(Key, String)>,
}

#[derive(Arbitrary, Debug)]
enum Host {
    V4([u8; 4], Option<u16>),
    V6([u16; 8], Option<u16>),
    Name(Vec<u8>, Option<u16>),
}

#[derive(Arbitrary, Debug)]
enum Key {
    Known(u8),
    Other(String),
}

#[derive(Arbitrary, Debug)]
struct Sloppy {
    scheme: u8,
    user: Option<String>,
    password: Vec<u8>,
    hosts: String,
    service: String,
    options: Vec<(Key, String)>,
    sentinel_password: Option<Vec<u8>>,
    /// Where among the options `sentinel_password` goes.
    position: u8,
}

#[derive(Arbitrary, Debug)]
enum Op {
    Set(Key, String),
    Service(String),
    Sentinel(String, u16),
    ClearSentinels,
}

fuzz_target!(|input: Input| match input {
    Input::Raw(url) => raw(&url),
    Input::Built(b) => built(&b),
    Input::Sloppy(s) => sloppy(&s),
    Input::Options(ops) => options(&ops),
});

fn key(k: &Key) -> String {
    match k {
        Key::Known(i) => KEYS[usize::from(*i) % KEYS.len()].to_string(),
        Key::Other(s) => s.clone(),
    }
}

fn scheme(s: u8) -> &'static str {
    [
        "redis+sentinel",
        "valkey+sentinel",
        "rediss+sentinel",
        "valkeys+sentinel",
    ][usize::from(s % 4)]
}

fn enc(s: &str) -> String {
    utf8_percent_encode(s, ENCODE).to_string()
}

/// The same config with other passwords (and the other fields as they are).
fn with_passwords(c: &Config, password: &str) -> Config {
    let swap = |a: &Option<Credentials>| {
        a.as_ref().map(|a| Credentials {
            username: a.username.clone(),
            password: Secret::new(format!("{password}{}", a.password.expose())),
        })
    };
    Config {
        auth: swap(&c.auth),
        sentinel_auth: swap(&c.sentinel_auth),
        ..c.clone()
    }
}

/// `Debug` and the redacted URL do not depend on the passwords.
fn check_secrets_hidden(c: &Config) {
    let other = with_passwords(c, "other-");
    assert_eq!(
        format!("{c:?}"),
        format!("{other:?}"),
        "Debug shows a password"
    );
    assert_eq!(
        c.redacted_url(),
        other.redacted_url(),
        "redacted_url shows a password"
    );
}

/// What `validate` promises of an accepted config.
fn check_valid(c: &Config) {
    assert!(!c.sentinels.is_empty());
    for s in &c.sentinels {
        assert_ne!(s.port, 0, "{s:?}");
        if s.host.parse::<std::net::IpAddr>().is_err() {
            let name = s.host.strip_suffix('.').unwrap_or(&s.host);
            assert!(!name.is_empty() && name.len() <= 253, "{s:?}");
            assert!(
                name.split('.').all(|l| !l.is_empty()
                    && l.len() <= 63
                    && l.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')),
                "{s:?}"
            );
        }
    }
    assert!(!c.service.is_empty());
    assert!(!c
        .service
        .chars()
        .any(|ch| ch.is_whitespace() || ch.is_control()));
    assert!(c.retry_base_ms <= c.retry_max_ms);
    let any_tls = c.sentinel_tls || c.data_tls;
    for file in [&c.tls_ca_file, &c.tls_cert_file, &c.tls_key_file] {
        assert!(file.is_none() || any_tls);
    }
    for file in [
        &c.sentinel_tls_ca_file,
        &c.sentinel_tls_cert_file,
        &c.sentinel_tls_key_file,
    ] {
        assert!(file.is_none() || c.sentinel_tls);
    }
    if let Some(name) = &c.client_name {
        assert!(!name.is_empty() && !name.chars().any(|ch| ch.is_whitespace() || ch.is_control()));
    }
}

fn raw(url: &str) {
    match Config::from_url(url) {
        Ok(c) => {
            check_valid(&c);
            c.validate().expect("from_url validates");
            check_secrets_hidden(&c);
            // The redacted URL names the same sentinels, service and user (both escaped).
            let redacted = c.redacted_url();
            let again = Config::from_url(&redacted)
                .unwrap_or_else(|e| panic!("redacted {redacted:?} does not parse: {e}"));
            assert_eq!(again.sentinels, c.sentinels);
            assert_eq!(again.service, c.service);
            let user = |c: &Config| c.auth.as_ref().and_then(|a| a.username.clone());
            assert_eq!(user(&again), user(&c), "{redacted}");
        }
        Err(e) => assert_eq!(e.code(), ErrorCode::Config, "{e}"),
    }
}

fn host(h: &Host) -> (String, Address) {
    let port = |p: &Option<u16>| p.map(|p| p.max(1));
    let (text, host, p) = match h {
        Host::V4(ip, p) => {
            let ip = std::net::Ipv4Addr::from(*ip).to_string();
            (ip.clone(), ip, port(p))
        }
        Host::V6(ip, p) => {
            let ip = std::net::Ipv6Addr::from(*ip).to_string();
            (format!("[{ip}]"), ip, port(p))
        }
        Host::Name(seed, p) => {
            const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789-_.ABCXYZ";
            let text: String = seed
                .iter()
                .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
                .collect();
            let mut labels: Vec<String> = text
                .split('.')
                .filter(|l| !l.is_empty())
                .map(|l| l.chars().take(63).collect())
                .collect();
            let mut name = String::new();
            for label in labels.drain(..) {
                if name.len() + 1 + label.len() > 253 {
                    break;
                }
                if !name.is_empty() {
                    name.push('.');
                }
                name += &label;
            }
            if name.is_empty() || name.contains(':') {
                name = "h".to_string();
            }
            (name.clone(), name, port(p))
        }
    };
    let text = match p {
        Some(p) => format!("{text}:{p}"),
        None => text,
    };
    (text, Address::new(host, p.unwrap_or(26379)))
}

fn built_url(b: &Built, password: Option<&str>) -> String {
    let userinfo = match (&b.user, password) {
        (Some(u), Some(p)) => format!("{}:{}@", enc(u), enc(p)),
        (None, Some(p)) => format!(":{}@", enc(p)),
        (Some(u), None) => format!("{}@", enc(u)),
        (None, None) => String::new(),
    };
    let hosts: Vec<String> = b.hosts.iter().take(5).map(|h| host(h).0).collect();
    let query: Vec<String> = b
        .options
        .iter()
        .map(|(k, v)| {
            let k = key(k);
            // Keys are not percent-decoded; leave out what would break the query's structure.
            let k: String = k
                .chars()
                .filter(|c| !matches!(c, '&' | '=' | '#'))
                .collect();
            format!("{k}={}", enc(v))
        })
        .collect();
    let query = if query.is_empty() {
        String::new()
    } else {
        format!("?{}", query.join("&"))
    };
    format!(
        "{}://{userinfo}{}/{}{query}",
        scheme(b.scheme),
        hosts.join(","),
        enc(&b.service)
    )
}

fn built(b: &Built) {
    if b.hosts.is_empty() {
        return;
    }
    let url = built_url(b, b.password.as_deref());
    // The config the parts make, through the same `set` and `validate`.
    let tls = b.scheme % 4 >= 2;
    let mut expected = Config {
        sentinels: b.hosts.iter().take(5).map(|h| host(h).1).collect(),
        service: b.service.clone(),
        auth: match (&b.user, &b.password) {
            (Some(u), Some(p)) => Some(Credentials {
                username: (!u.is_empty()).then(|| u.clone()),
                password: Secret::new(p.clone()),
            }),
            (None, Some(p)) => Some(Credentials {
                username: None,
                password: Secret::new(p.clone()),
            }),
            // A lone userinfo is a password (redis-py and ioredis read it so).
            (Some(u), None) => Some(Credentials {
                username: None,
                password: Secret::new(u.clone()),
            }),
            (None, None) => None,
        },
        sentinel_tls: tls,
        data_tls: tls,
        ..Config::default()
    };
    let mut verdict = Ok(());
    for (k, v) in &b.options {
        let k: String = key(k)
            .chars()
            .filter(|c| !matches!(c, '&' | '=' | '#'))
            .collect();
        verdict = expected.set(&k, v);
        if verdict.is_err() {
            break;
        }
    }
    let verdict = verdict.and_then(|_| expected.validate());
    match (Config::from_url(&url), verdict) {
        (Ok(c), Ok(())) => {
            assert_eq!(c, expected, "{url}");
            check_valid(&c);
            check_secrets_hidden(&c);
        }
        (Err(e), Err(want)) => {
            assert_eq!(e.code(), ErrorCode::Config);
            assert_eq!(e.message(), want.message(), "{url}");
        }
        (got, want) => panic!("{url}: got {got:?}, expected {want:?}"),
    }
    // Errors and configs do not depend on the password (a config's Debug prints it as ***).
    if b.password.is_some() {
        let other = built_url(b, Some(&b.other_password));
        match (Config::from_url(&url), Config::from_url(&other)) {
            (Ok(x), Ok(y)) => assert_eq!(format!("{x:?}"), format!("{y:?}")),
            (Err(x), Err(y)) => assert_eq!(
                x.to_string(),
                y.to_string(),
                "error text depends on the password"
            ),
            (x, y) => panic!("the password decided acceptance: {x:?} / {y:?}"),
        }
    }
}

/// `bytes` mapped onto `alphabet`.
fn text(bytes: &[u8], alphabet: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| char::from(alphabet[usize::from(*b) % alphabet.len()]))
        .collect()
}

/// `s` without the password-only letters, and without `%`: an escape such as `%51` would
/// decode to one of them.
fn unmarked(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c == '%' || (c.is_ascii() && MARKERS.contains(&(c as u8))) {
                'x'
            } else {
                c
            }
        })
        .collect()
}

fn marked(s: &str) -> bool {
    s.bytes().any(|b| MARKERS.contains(&b))
}

fn sloppy(s: &Sloppy) {
    // What people paste unencoded: base64, and what RFC 3986 lets userinfo (sub-delims, `:`)
    // and query values (also `/ ? @`) carry raw. No `%`: a raw `%` is an escape.
    const USERINFO: &[u8] = b"GJKQVWYZ0189+/=!$'()*,;:@#";
    const QUERY_VALUE: &[u8] = b"GJKQVWYZ0189+/=!$'()*,;:@#?";
    let password = text(&s.password, USERINFO);
    let userinfo = match &s.user {
        Some(u) => format!(
            "{}:{password}@",
            unmarked(u).replace(['@', '/', '?', ':'], "")
        ),
        None => format!(":{password}@"),
    };
    // The other parts are arbitrary but keep the URL's structure: the password is the one
    // sloppy part.
    let plain = |t: &str, drop: &[char]| unmarked(t).replace(drop, "");
    let mut query: Vec<String> = s
        .options
        .iter()
        .map(|(k, v)| format!("{}={}", plain(&key(k), &['&', '=']), plain(v, &['&'])))
        .collect();
    let sentinel_password = s.sentinel_password.as_deref().map(|p| text(p, QUERY_VALUE));
    if let Some(p) = &sentinel_password {
        let at = usize::from(s.position) % (query.len() + 1);
        query.insert(at, format!("sentinel_password={p}"));
    }
    let url = format!(
        "{}://{userinfo}{}/{}?{}",
        scheme(s.scheme),
        plain(&s.hosts, &['@', '/', '?']),
        plain(&s.service, &['?']),
        query.join("&")
    );
    match Config::from_url(&url) {
        Ok(c) => {
            let shown = format!("{c:?} {}", c.redacted_url());
            assert!(!marked(&shown), "{url} shows a password: {shown}");
            let auth = c.auth.as_ref().expect("the URL has a userinfo");
            if !s.options.iter().any(|(k, _)| key(k) == "password") {
                assert_eq!(
                    auth.password.expose(),
                    password,
                    "{url}: read another password"
                );
            }
            if let Some(p) = &sentinel_password {
                let sauth = c.sentinel_auth.as_ref().expect("sentinel_password given");
                // A later `sentinel_password` option may override it.
                if !s.options.iter().any(|(k, _)| key(k) == "sentinel_password") {
                    assert_eq!(
                        sauth.password.expose(),
                        p,
                        "{url}: read another sentinel password"
                    );
                }
            }
        }
        Err(e) => assert!(
            !marked(&e.to_string()),
            "{url} gives an error showing a password: {e}"
        ),
    }
}

fn options(ops: &[Op]) {
    let mut c = Config::from_url("redis+sentinel://127.0.0.1/mymaster").unwrap();
    for op in ops.iter().take(64) {
        match op {
            Op::Set(k, v) => {
                let k = key(k);
                let before = c.clone();
                match c.set(&k, v) {
                    Ok(()) => {
                        if k == "password" {
                            assert_eq!(c.auth.as_ref().unwrap().password.expose(), v);
                        }
                        if k == "sentinel_password" {
                            assert_eq!(c.sentinel_auth.as_ref().unwrap().password.expose(), v);
                        }
                    }
                    Err(e) => {
                        assert_eq!(e.code(), ErrorCode::Config);
                        assert_eq!(c, before, "a refused set({k:?}) changed the config");
                        assert!(!matches!(k.as_str(), "password" | "sentinel_password"));
                    }
                }
            }
            Op::Service(s) => c.service = s.clone(),
            Op::Sentinel(h, p) => c.sentinels.push(Address::new(h.clone(), *p)),
            Op::ClearSentinels => c.sentinels.clear(),
        }
        check_secrets_hidden(&c);
        match c.validate() {
            Ok(()) => check_valid(&c),
            Err(e) => assert_eq!(e.code(), ErrorCode::Config),
        }
    }
}
