//! Reaching one endpoint, timed step by step: name resolution, a bare TCP connect, the full
//! connect the client makes (TCP, TLS, HELLO/AUTH) through [`crate::node::connect`], and, with
//! TLS, the certificate's expiry.

use std::net::SocketAddr;
use std::time::Instant;

use tokio::net::TcpStream;

use super::report::{ms, Problem, Reach, Stage};
use super::tls_expiry;
use crate::dns::Resolver;
use crate::error::{duration_text, Error};
use crate::node;
use crate::resp::{ConnectOptions, Connection};
use crate::types::Address;

/// An endpoint reached (or not).
pub(super) struct Reached {
    /// The timings and the failure, for the report.
    pub reach: Reach,
    /// The connection, when the handshake succeeded.
    pub conn: Option<Connection>,
    /// The addresses the host resolved to.
    pub resolved: Vec<SocketAddr>,
    /// The error that stopped it, as the core reported it.
    pub error: Option<Error>,
}

impl Reached {
    fn failed(mut reach: Reach, stage: Stage, error: Error, resolved: Vec<SocketAddr>) -> Reached {
        reach.failed_at = Some(stage);
        reach.error = Some(Problem::from(&error));
        Reached {
            reach,
            conn: None,
            resolved,
            error: Some(error),
        }
    }
}

/// Whether `host` is an IP literal (`[v6]` included).
pub(super) fn is_ip_literal(host: &str) -> bool {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    bare.parse::<std::net::IpAddr>().is_ok()
}

/// Resolves `address` (timed; the resolver is fresh, so this is a real lookup the first time),
/// connects bare TCP to its first address (timed), then connects as the client does (timed).
/// Each step has the deadline of its setting (DNS timeout, connect timeout).
pub(super) async fn reach(
    resolver: &Resolver,
    address: &Address,
    options: &ConnectOptions,
) -> Reached {
    let mut reach = Reach {
        ip_literal: is_ip_literal(&address.host),
        ..Reach::default()
    };
    let started = Instant::now();
    let resolved = match resolver.resolve(&address.host, address.port).await {
        Ok(resolved) => resolved,
        Err(e) => return Reached::failed(reach, Stage::Resolve, e, Vec::new()),
    };
    reach.resolve_ms = Some(if reach.ip_literal {
        0.0
    } else {
        ms(started.elapsed())
    });
    reach.addresses = resolved.iter().map(SocketAddr::to_string).collect();
    let Some(first) = resolved.first().copied() else {
        let e = Error::connection_lost(format!("{address} resolved to no address"));
        return Reached::failed(reach, Stage::Resolve, e, resolved);
    };

    let started = Instant::now();
    match tokio::time::timeout(options.connect_timeout, TcpStream::connect(first)).await {
        Ok(Ok(stream)) => {
            reach.tcp_connect_ms = Some(ms(started.elapsed()));
            drop(stream);
        }
        Ok(Err(e)) if resolved.len() == 1 => {
            let e = Error::from(e).context(format!("cannot connect to {first}"));
            return Reached::failed(reach, Stage::Tcp, e, resolved);
        }
        Err(_) if resolved.len() == 1 => {
            let e = Error::timeout(format!(
                "TCP connect to {first} got no answer within {}",
                duration_text(options.connect_timeout)
            ));
            return Reached::failed(reach, Stage::Tcp, e, resolved);
        }
        // Other addresses may still work: the full connect tries them all.
        _ => {}
    }

    let started = Instant::now();
    let conn = match node::connect(resolver, address, options).await {
        Ok((conn, _)) => conn,
        Err(e) => {
            let stage = if reach.tcp_connect_ms.is_some() {
                Stage::Handshake
            } else {
                Stage::Tcp
            };
            return Reached::failed(reach, stage, e, resolved);
        }
    };
    reach.connect_ms = Some(ms(started.elapsed()));

    if let Some(tls) = &options.tls {
        match tls_expiry::days_left(conn.peer(), &address.host, tls, options.connect_timeout).await
        {
            Ok(days) => reach.tls_days_left = Some(days),
            Err(why) => reach.tls_note = Some(why),
        }
    }
    Reached {
        reach,
        conn: Some(conn),
        resolved,
        error: None,
    }
}
