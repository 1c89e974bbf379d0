//! The URL form: `redis+sentinel://[user[:password]@]host[:port][,host[:port]...]/service[?key=value&...]`.

use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

use super::names::parse_host_port;
use super::settings::Config;
use crate::error::Error;
use crate::types::{Credentials, Secret};

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

impl Config {
    /// The URL form of this configuration with passwords replaced by `***`.
    pub fn redacted_url(&self) -> String {
        let user = match &self.auth {
            Some(Credentials {
                username: Some(u), ..
            }) => format!("{}:***@", encode(u)),
            Some(_) => ":***@".to_string(),
            None => String::new(),
        };
        let hosts: Vec<String> = self.sentinels.iter().map(|a| a.to_string()).collect();
        let scheme = if self.sentinel_tls && self.data_tls {
            "rediss+sentinel"
        } else {
            "redis+sentinel"
        };
        format!(
            "{scheme}://{user}{}/{}",
            hosts.join(","),
            encode(&self.service)
        )
    }
}
