//! A session's own connection to a data node: resolved without blocking, TCP with TLS where the
//! URL asks for it, and no handshake of the proxy's own. What the client says (HELLO, AUTH,
//! SELECT ...) is the handshake; after a move the session replays it.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};

use crate::dns::Resolver;
use crate::error::{Error, Result};
use crate::tls::TlsOptions;
use crate::types::Address;

/// A byte stream the proxy reads and writes: a client's (TCP or Unix) or an upstream (TCP or
/// TLS).
pub(super) trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// Opens a stream to `address`, trying each IP it resolves to in turn, within `timeout` for the
/// whole (resolution, connect and TLS handshake).
pub(super) async fn connect(
    resolver: &Resolver,
    address: &Address,
    tls: Option<&TlsOptions>,
    timeout: Duration,
) -> Result<Box<dyn Stream>> {
    let attempt = async {
        let resolved = resolver.resolve(&address.host, address.port).await?;
        let mut last = None;
        for addr in resolved {
            match open(addr, &address.host, tls).await {
                Ok(stream) => return Ok(stream),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            Error::new(
                crate::ErrorCode::ConnectionLost,
                format!("{address} resolved to no address"),
            )
        }))
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(result) => result,
        Err(_) => Err(Error::timeout(format!(
            "connecting to {address} took longer than {}",
            crate::error::duration_text(timeout)
        ))),
    }
}

async fn open(addr: SocketAddr, host: &str, tls: Option<&TlsOptions>) -> Result<Box<dyn Stream>> {
    let stream = crate::resp::tcp(addr).await?;
    Ok(match tls {
        None => Box::new(stream),
        Some(tls) => Box::new(crate::tls::handshake(stream, host, addr, tls).await?),
    })
}
