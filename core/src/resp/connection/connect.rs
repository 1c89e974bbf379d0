//! Opening a [`Connection`]: TCP (and TLS), the task, then the handshake on the new connection,
//! all under one deadline. Apart from the handle, so the handshake (which runs on a
//! [`Connection`]) and the handle do not name each other.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpStream;

use super::handle::Connection;
use super::options::ConnectOptions;
use super::socket::Socket;
use super::task::Transport;
use crate::error::{Error, Result};
use crate::resp::handshake;

impl Connection {
    /// Connects over TCP (with `TCP_NODELAY`) and runs the handshake of `opts`, all within
    /// `opts.connect_timeout`.
    ///
    /// Errors name `addr`: [`ErrorCode::Timeout`](crate::ErrorCode::Timeout) past the deadline,
    /// [`ErrorCode::Auth`](crate::ErrorCode::Auth) for refused credentials, the server's error for
    /// a failed `CLIENT SETNAME`/`SELECT`, connection errors otherwise. Must run inside a tokio
    /// runtime: the connection's task is spawned on it.
    ///
    /// With [`ConnectOptions::tls`] the certificate is verified against `addr`'s IP (or the
    /// configured server name); use [`Connection::connect_named`] to verify against a host name.
    #[cfg(any(test, feature = "internals"))]
    pub async fn connect(addr: SocketAddr, opts: &ConnectOptions) -> Result<Connection> {
        Connection::connect_named(addr, &addr.ip().to_string(), opts).await
    }

    /// [`Connection::connect`] to `addr`, which `host` (a name or IP literal, as configured or
    /// as a sentinel reported it) resolved to. With TLS, the server's certificate is verified
    /// against `host` unless [`TlsOptions::server_name`] overrides it; TLS failures (unknown CA,
    /// name mismatch, a refused client certificate) have [`ErrorCode::Tls`](crate::ErrorCode::Tls).
    /// Without TLS, `host` is not used.
    pub async fn connect_named(
        addr: SocketAddr,
        host: &str,
        opts: &ConnectOptions,
    ) -> Result<Connection> {
        let attempt = async {
            let stream = tcp(addr).await?;
            let transport = match &opts.tls {
                None => Transport::Plain(Arc::new(Socket::new(stream).map_err(|e| {
                    Error::from(e).context(format_args!("cannot connect to {addr}"))
                })?)),
                Some(tls) => {
                    let stream = crate::tls::handshake(stream, host, addr, tls).await?;
                    Transport::Tls(Box::new(stream))
                }
            };
            let conn = Connection::spawn(transport, addr);
            if let Err(e) = handshake::run(&conn, opts).await {
                conn.close();
                return Err(e.context(format_args!("handshake with {addr}")));
            }
            Ok(conn)
        };
        match tokio::time::timeout(opts.connect_timeout, attempt).await {
            Ok(result) => result,
            Err(_) => Err(Error::timeout(format!(
                "connecting to {addr} took longer than {}",
                crate::error::duration_text(opts.connect_timeout)
            ))),
        }
    }
}

/// Opens a TCP connection to `addr` with Nagle off (requests and replies pass one by one when a
/// caller does not pipeline; Nagle would hold each for the previous one's acknowledgement).
/// Errors say `cannot connect to ADDR: reason`. The data path's connections and the proxy's
/// upstreams both start here.
pub(crate) async fn tcp(addr: SocketAddr) -> Result<TcpStream> {
    let stream = TcpStream::connect(addr)
        .await
        .map_err(|e| Error::from(e).context(format_args!("cannot connect to {addr}")))?;
    stream
        .set_nodelay(true)
        .map_err(|e| Error::from(e).context(format_args!("cannot connect to {addr}")))?;
    Ok(stream)
}
