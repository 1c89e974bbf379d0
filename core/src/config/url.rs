//! The URL form: `redis+sentinel://[user[:password]@]host[:port][,host[:port]...]/service[?key=value&...]`.

use super::*;
use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// What a user name or service keeps unescaped when written back into a URL: RFC 3986's
/// unreserved characters.
const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

const SCHEMES: [&str; 2] = ["redis+sentinel", "valkey+sentinel"];
const TLS_SCHEMES: [&str; 2] = ["rediss+sentinel", "valkeys+sentinel"];

impl Config {
    /// Parses `redis+sentinel://[user[:password]@]host[:port][,host[:port]...]/service[?key=value&...]`.
    ///
    /// `valkey+sentinel://` is a synonym; `rediss+sentinel://` (and `valkeys+sentinel://`) turn
    /// TLS on for sentinels and data nodes alike. Percent-escapes are decoded in the userinfo and
    /// in query values. Every error names the offending part and never contains the password.
    pub fn from_url(url: &str) -> crate::Result<Config> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| Error::config("URL must start with redis+sentinel://"))?;
        let tls = TLS_SCHEMES.contains(&scheme);
        if !tls && !SCHEMES.contains(&scheme) {
            return Err(Error::config(format!(
                "unknown scheme '{scheme}': expected redis+sentinel, rediss+sentinel or \
                 valkey+sentinel"
            )));
        }
        let (before_query, query) = match rest.split_once('?') {
            Some((a, q)) => (a, Some(q)),
            None => (rest, None),
        };
        let (authority, path) = before_query
            .split_once('/')
            .ok_or_else(|| Error::config("URL has no /service after the sentinel list"))?;
        // The userinfo ends at the first '/': a password holding a raw '/' (base64 has them)
        // leaves its '@' behind it, and its start would be read as a sentinel (its text then
        // shown in errors, or a digit-only start taken as a port). Refused, showing nothing.
        if path.contains('@') {
            return Err(Error::config(
                "'@' after the first '/': write a '/' in the user name or password as %2F \
                 (and an '@' in the service name as %40)",
            ));
        }
        let (userinfo, hosts) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let mut config = Config {
            auth: userinfo.map(parse_userinfo).transpose()?,
            sentinel_tls: tls,
            data_tls: tls,
            ..Config::default()
        };
        config.sentinels = hosts
            .split(',')
            .enumerate()
            .map(|(i, h)| parse_host_port(h).map_err(|e| e.context(format!("sentinel #{}", i + 1))))
            .collect::<crate::Result<_>>()?;
        config.service = decode(path, "service")?;
        if let Some(query) = query {
            for pair in query.split('&').filter(|p| !p.is_empty()) {
                let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                let value = decode(value, key)?;
                config.set(key, &value)?;
            }
        }
        config.validate()?;
        Ok(config)
    }
}

/// `text` escaped for the userinfo or path of a URL, so that [`Config::redacted_url`] parses
/// back to the same user name and service (a name holding `@`, `%` or `/` included).
pub(super) fn encode(text: &str) -> String {
    utf8_percent_encode(text, UNRESERVED).to_string()
}

fn decode(value: &str, what: &str) -> crate::Result<String> {
    percent_decode_str(value)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| Error::config(format!("{what} is not valid UTF-8 after percent-decoding")))
}

fn parse_userinfo(userinfo: &str) -> crate::Result<Credentials> {
    let (user, password) = match userinfo.split_once(':') {
        Some((u, p)) => (u, Some(p)),
        None => (userinfo, None),
    };
    let user = decode(user, "username")?;
    // Redis URLs put a lone password in the user position ("redis://secret@host"); with no colon
    // we follow that convention, as redis-py and ioredis do.
    let (username, password) = match password {
        Some(p) => (
            (!user.is_empty()).then_some(user),
            percent_decode_str(p)
                .decode_utf8()
                .map(|s| s.into_owned())
                .map_err(|_| Error::config("password is not valid UTF-8 after percent-decoding"))?,
        ),
        None => (None, user),
    };
    Ok(Credentials {
        username,
        password: Secret::new(password),
    })
}

/// Parses `host`, `host:port`, `[v6]` or `[v6]:port` (default port 26379).
///
/// Host names are checked up front (length, labels, characters); errors show at most the start
/// of what was given.
pub(crate) fn parse_host_port(text: &str) -> crate::Result<Address> {
    if text.is_empty() {
        return Err(Error::config("empty host"));
    }
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| Error::config(format!("'{}' has an unclosed '['", shorten(text))))?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or_else(|| {
                Error::config(format!(
                    "unexpected '{}' after ']' in '{}'",
                    shorten(p),
                    shorten(text)
                ))
            })?),
        };
        if host.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(Error::config(format!(
                "'{}' in brackets is not an IPv6 address",
                shorten(host)
            )));
        }
        (host, port)
    } else {
        match text.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') => (h, Some(p)),
            Some(_) => {
                return Err(Error::config(format!(
                    "'{}': write IPv6 addresses in brackets, like [::1]:26379",
                    shorten(text)
                )))
            }
            None => (text, None),
        }
    };
    if host.is_empty() {
        return Err(Error::config(format!(
            "'{}' has an empty host",
            shorten(text)
        )));
    }
    if host.parse::<std::net::IpAddr>().is_err() {
        if let Some(problem) = host_name_problem(host) {
            return Err(Error::config(problem));
        }
    }
    let port = match port {
        None => DEFAULT_SENTINEL_PORT,
        Some(p) => match p.parse::<u16>() {
            Ok(0) | Err(_) => {
                return Err(Error::config(format!(
                    "port '{}' of '{}' is not in 1..65535",
                    shorten(p),
                    shorten(host)
                )))
            }
            Ok(n) => n,
        },
    };
    Ok(Address::new(host, port))
}
