//! Host names, `host:port` and server names as a user writes them: checked, parsed, and shortened
//! for error texts so a huge value never shows whole.

use crate::error::Error;
use crate::types::Address;

/// The default sentinel port when a seed gives none.
pub const DEFAULT_SENTINEL_PORT: u16 = 26379;

/// Longest host name in characters, without a final dot (RFC 1035: 255 octets on the wire).
const MAX_HOST_NAME: usize = 253;
/// Longest label (the part between dots) of a host name.
const MAX_HOST_LABEL: usize = 63;
/// Characters of a long value shown in error texts.
const SHOWN_CHARS: usize = 64;

/// `text` for an error message: at most its first 64 characters, with an ellipsis when cut, so a
/// huge value never ends up whole in errors or logs.
pub(crate) fn shorten(text: &str) -> String {
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// Why `host` cannot be a host name, or `None` when it can: empty, longer than 253 characters
/// (a final dot aside), a label empty or longer than 63, or a character other than ASCII letters,
/// digits, `-`, `_` and `.`. The text gives lengths and shows at most the start of the name. For
/// names only: check IP literals before calling.
pub(crate) fn host_name_problem(host: &str) -> Option<String> {
    let name = host.strip_suffix('.').unwrap_or(host);
    if name.is_empty() {
        return Some(format!("'{}' is not a valid host name", shorten(host)));
    }
    if name.len() > MAX_HOST_NAME {
        return Some(format!(
            "host name is {} characters long, more than the {MAX_HOST_NAME} allowed: '{}'",
            name.len(),
            shorten(name)
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
    {
        return Some(format!("'{}' is not a valid host name", shorten(name)));
    }
    for (i, label) in name.split('.').enumerate() {
        if label.is_empty() {
            return Some(format!(
                "host name '{}' has an empty label (two dots in a row, or a leading dot)",
                shorten(name)
            ));
        }
        if label.len() > MAX_HOST_LABEL {
            return Some(format!(
                "label #{} of host name '{}' is {} characters long, more than the \
                 {MAX_HOST_LABEL} allowed",
                i + 1,
                shorten(name),
                label.len()
            ));
        }
    }
    None
}

/// Parses a host name or IP literal into the name rustls verifies; `[v6]` brackets are accepted.
pub(crate) fn parse_server_name(
    name: &str,
) -> crate::Result<rustls_pki_types::ServerName<'static>> {
    let bare = name
        .strip_prefix('[')
        .and_then(|n| n.strip_suffix(']'))
        .unwrap_or(name);
    rustls_pki_types::ServerName::try_from(bare.to_string()).map_err(|_| {
        Error::new(
            crate::error::ErrorCode::Tls,
            format!("'{name}' is not a valid TLS server name (a DNS name or an IP address)"),
        )
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
