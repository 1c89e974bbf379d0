//! Reaching a node by the address it was configured or reported with: resolve it without
//! blocking, connect (TLS names checked against that address's host), and check its role.
//!
//! Discovery, the monitor's replica probes, event subscriptions and the data path all reach nodes
//! this one way.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use crate::config::Config;
use crate::dns::Resolver;
use crate::error::{Error, ErrorCode, Result};
use crate::resp::{ConnectOptions, Connection, Value};
use crate::types::Address;
use crate::types::{Role, Side};

/// The role a node must have for a connection to it to be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Expect {
    /// ROLE must say master.
    Primary,
    /// ROLE must say slave.
    Replica,
}

/// The handshake towards one side, as every connection of a client with this configuration
/// makes it: connect timeout, the side's credentials and TLS, client name, protocol, database 0
/// (clients select their `db` on their own data connections).
///
/// Reads the side's TLS files (blocking file I/O): call it on a host thread, never on a core
/// worker.
pub fn connect_options(config: &Config, side: Side) -> Result<ConnectOptions> {
    Ok(ConnectOptions {
        connect_timeout: config.connect_timeout(),
        auth: match side {
            Side::Sentinel => config.sentinel_auth.clone(),
            Side::Data => config.auth.clone(),
        },
        client_name: config.client_name.clone(),
        protocol: config.protocol,
        db: 0,
        tls: crate::tls::options(config, side)?,
    })
}

/// Resolves `address` and opens a connection to its first reachable IP; returns the resolution
/// too, for the sentinel list's bookkeeping.
///
/// When every address fails, the error names each one tried with its reason:
/// `connecting to localhost:6379 failed: 127.0.0.1:6379: connection refused; [::1]:6379:
/// connection refused`.
pub async fn connect(
    resolver: &Resolver,
    address: &Address,
    options: &ConnectOptions,
) -> Result<(Connection, Vec<SocketAddr>)> {
    let resolved = resolver.resolve(&address.host, address.port).await?;
    let mut failures = Vec::with_capacity(resolved.len());
    for addr in &resolved {
        // Named: with TLS the certificate is checked against the host as configured or as the
        // sentinel reported it (a hostname under announce-hostnames), not the resolved IP.
        match Connection::connect_named(*addr, &address.host, options).await {
            Ok(conn) => return Ok((conn, resolved)),
            Err(e) => failures.push((*addr, e)),
        }
    }
    Err(all_failed(address, failures))
}

/// One error for a node none of whose addresses could be used, naming every address tried:
/// `connecting to localhost:6379 failed: 127.0.0.1:6379: connection refused; [::1]:6379:
/// connection refused`.
///
/// The code is that of the first failure that reached a server (auth, TLS, a server reply ...),
/// else of the last one; an error reply keeps its server code. The error of an IP literal's one
/// address is returned as it was.
fn all_failed(address: &Address, mut failures: Vec<(SocketAddr, Error)>) -> Error {
    if failures.is_empty() {
        return Error::new(
            ErrorCode::ConnectionLost,
            format!("{address} resolved to no address"),
        );
    }
    if failures.len() == 1 && address.host.parse::<IpAddr>().is_ok() {
        if let Some((_, e)) = failures.pop() {
            return e;
        }
    }
    let decisive = failures
        .iter()
        .position(|(_, e)| {
            e.server_code().is_some()
                || !matches!(e.code(), ErrorCode::ConnectionLost | ErrorCode::Timeout)
        })
        .unwrap_or(failures.len() - 1);
    let describe = |addr: &SocketAddr, e: &Error| {
        let addr = addr.to_string();
        let message = e.message();
        match message.strip_prefix(&format!("cannot connect to {addr}: ")) {
            Some(reason) => format!("{addr}: {}", lower_first(without_os_error(reason))),
            None if message.contains(&addr) => message.to_string(),
            None => format!("{addr}: {message}"),
        }
    };
    let (addr, error) = failures.remove(decisive);
    if error.server_code().is_some() {
        // The reply's code must survive, and only context can be put in front of it.
        let mut context = format!("connecting to {address} failed");
        if !failures.is_empty() {
            let others: Vec<String> = failures.iter().map(|(a, e)| describe(a, e)).collect();
            context = format!("{context} ({})", others.join("; "));
        }
        if !error.message().contains(&addr.to_string()) {
            context = format!("{context}: {addr}");
        }
        return error.context(context);
    }
    failures.insert(decisive, (addr, error));
    let tried: Vec<String> = failures.iter().map(|(a, e)| describe(a, e)).collect();
    let code = failures[decisive].1.code();
    Error::new(
        code,
        format!("connecting to {address} failed: {}", tried.join("; ")),
    )
}

/// `Connection refused (os error 111)` → `Connection refused`.
fn without_os_error(text: &str) -> &str {
    match text.rfind(" (os error ") {
        Some(at) if text.ends_with(')') => &text[..at],
        _ => text,
    }
}

/// `Connection refused` → `connection refused`; keeps words like `TLS` as they are.
fn lower_first(text: &str) -> String {
    let mut chars = text.chars();
    match (chars.next(), chars.next()) {
        (Some(first), Some(second))
            if first.is_ascii_uppercase() && second.is_ascii_lowercase() =>
        {
            format!("{}{}", first.to_ascii_lowercase(), &text[1..])
        }
        _ => text.to_string(),
    }
}

/// Checks with ROLE that `conn` reaches a node in the expected role; closes it otherwise.
///
/// A node demoted (or not yet promoted) behind the sentinels' back, or named by a stale sentinel,
/// must not be used. A user that ACLs forbid ROLE (NOPERM) is trusted on the sentinels' word, as
/// StackExchange.Redis does since 2.13.17: there is nothing better to check with.
pub async fn verify_role(
    conn: &Connection,
    address: &Address,
    expect: Expect,
    timeout: Duration,
) -> Result<()> {
    let role = conn
        .request_timeout(&["ROLE"], timeout)
        .await
        .and_then(parse_role);
    match (&role, expect) {
        (Ok(Role::Master), Expect::Primary) | (Ok(Role::Replica { .. }), Expect::Replica) => {
            return Ok(())
        }
        (Err(e), _) if e.server_code() == Some("NOPERM") => {
            tracing::warn!(node = %address, "ROLE refused by ACL; role not verified");
            return Ok(());
        }
        _ => {}
    }
    conn.close();
    match role {
        Err(e) => Err(e.context(format!("ROLE on {address}"))),
        Ok(role) => Err(Error::new(
            ErrorCode::NoHealthyPrimary,
            format!(
                "{address} was expected as {expect:?} but ROLE says {role:?} (stale sentinel, or \
                 changed behind the sentinels' back)"
            ),
        )),
    }
}

/// Parses a `ROLE` reply (a replica's primary only when its host and port are valid).
pub fn parse_role(value: Value) -> Result<Role> {
    let items = value
        .into_array()
        .ok_or_else(|| Error::protocol("ROLE: expected an array"))?;
    let mut items = items.into_iter();
    let first = items
        .next()
        .ok_or_else(|| Error::protocol("ROLE: empty reply"))?;
    let name = first
        .as_str()
        .ok_or_else(|| Error::protocol("ROLE: first element is not a string"))?
        .to_string();
    Ok(match name.as_str() {
        "master" => Role::Master,
        "slave" | "replica" => {
            let host = items.next();
            let port = items.next();
            let master = match (
                host.as_ref().and_then(Value::as_str),
                port.as_ref().and_then(Value::as_int),
            ) {
                (Some(h), Some(p)) if (1..=65535).contains(&p) && !h.is_empty() => {
                    Some(Address::new(h, p as u16))
                }
                _ => None,
            };
            Role::Replica { master }
        }
        _ => Role::Other(name),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dns::DnsOptions;
    use crate::sentinel::replies::shapes::bulk;
    use std::path::PathBuf;

    /// A port nothing listens on, on 127.0.0.1 (and most likely on 127.0.0.2).
    fn closed_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    fn resolver_with_hosts(text: &str) -> (Resolver, PathBuf) {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "sr-node-test-{}-{}.hosts",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
        ));
        std::fs::write(&path, text).unwrap();
        let resolver = Resolver::new(DnsOptions {
            // Nothing answers there: only the hosts file can resolve names.
            nameserver: Some("127.0.0.1:9".parse().unwrap()),
            timeout: Duration::from_millis(200),
            hosts_file: path.clone(),
            ..DnsOptions::default()
        })
        .unwrap();
        (resolver, path)
    }

    #[tokio::test]
    async fn a_failed_connect_names_every_address_tried() {
        let (resolver, path) =
            resolver_with_hosts("127.0.0.1 two.node.test\n127.0.0.2 two.node.test\n");
        let port = closed_port();
        let address = Address::new("two.node.test", port);
        let options = ConnectOptions {
            connect_timeout: Duration::from_secs(2),
            ..ConnectOptions::default()
        };
        let err = connect(&resolver, &address, &options).await.unwrap_err();
        let _ = std::fs::remove_file(path);
        assert!(
            matches!(err.code(), ErrorCode::ConnectionLost | ErrorCode::Timeout),
            "{err}"
        );
        let message = err.message();
        assert!(
            message.starts_with(&format!("connecting to two.node.test:{port} failed: ")),
            "{err}"
        );
        let first = message
            .find(&format!("127.0.0.1:{port}: "))
            .expect("first address");
        let second = message
            .find(&format!("127.0.0.2:{port}"))
            .expect("second address");
        assert!(first < second, "in the order tried: {err}");
        assert!(message.contains("; "), "{err}");
    }

    #[tokio::test]
    async fn a_name_with_one_address_is_named_in_the_error_too() {
        let (resolver, path) = resolver_with_hosts("127.0.0.1 one.node.test\n");
        let port = closed_port();
        let err = connect(
            &resolver,
            &Address::new("one.node.test", port),
            &ConnectOptions::default(),
        )
        .await
        .unwrap_err();
        let _ = std::fs::remove_file(path);
        assert_eq!(err.code(), ErrorCode::ConnectionLost, "{err}");
        assert_eq!(
            err.message(),
            format!(
                "connecting to one.node.test:{port} failed: 127.0.0.1:{port}: connection refused"
            ),
        );
        // An IP literal's error stays as the connection reported it.
        let err = connect(
            &resolver,
            &Address::new("127.0.0.1", port),
            &ConnectOptions::default(),
        )
        .await
        .unwrap_err();
        assert!(
            err.message()
                .starts_with(&format!("cannot connect to 127.0.0.1:{port}")),
            "{err}"
        );
    }

    #[test]
    fn a_server_reply_keeps_its_code_and_the_other_addresses_are_named() {
        let address = Address::new("both.node.test", 6379);
        let v4: SocketAddr = "127.0.0.1:6379".parse().unwrap();
        let v6: SocketAddr = "[::1]:6379".parse().unwrap();
        let err = all_failed(
            &address,
            vec![
                (
                    v4,
                    Error::connection_lost("Connection refused (os error 111)")
                        .context(format!("cannot connect to {v4}")),
                ),
                (
                    v6,
                    Error::server("WRONGPASS invalid username-password pair")
                        .context(format!("handshake with {v6}")),
                ),
            ],
        );
        assert_eq!(err.code(), ErrorCode::Auth);
        assert_eq!(err.server_code(), Some("WRONGPASS"));
        assert_eq!(
            err.message(),
            "connecting to both.node.test:6379 failed (127.0.0.1:6379: connection refused): \
             handshake with [::1]:6379: WRONGPASS invalid username-password pair"
        );
    }

    #[test]
    fn role_replies() {
        let m = Value::Array(vec![bulk("master"), Value::Int(0), Value::Array(vec![])]);
        assert_eq!(parse_role(m).unwrap(), Role::Master);
        let r = Value::Array(vec![
            bulk("slave"),
            bulk("127.0.0.1"),
            Value::Int(6379),
            bulk("connected"),
            Value::Int(1),
        ]);
        assert_eq!(
            parse_role(r).unwrap(),
            Role::Replica {
                master: Some(Address::new("127.0.0.1", 6379))
            }
        );
        let s = Value::Array(vec![bulk("sentinel"), Value::Array(vec![])]);
        assert_eq!(parse_role(s).unwrap(), Role::Other("sentinel".into()));
        assert!(parse_role(Value::Array(vec![])).is_err());
        assert!(parse_role(Value::Nil).is_err());
    }
}
