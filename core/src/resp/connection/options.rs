//! How to open a connection.

use std::time::Duration;

use crate::tls::TlsOptions;
use crate::types::{Credentials, Protocol};

/// How to open a [`Connection`](super::Connection): deadline and the state applied by the handshake.
#[derive(Clone, Debug)]
pub struct ConnectOptions {
    /// Deadline for the TCP connect and the whole handshake together.
    ///
    /// A zero duration expires at once; [`ConnectOptions::default`] uses 5 seconds.
    pub connect_timeout: Duration,
    /// Credentials sent with `HELLO 3 AUTH` or `AUTH`; never logged or put in errors.
    pub auth: Option<Credentials>,
    /// Sent with `HELLO 3 SETNAME` or `CLIENT SETNAME`.
    pub client_name: Option<String>,
    /// [`Protocol::Resp3`] tries `HELLO 3` first and falls back to RESP2 when the server refuses it.
    pub protocol: Protocol,
    /// Database selected with `SELECT` after authentication when not 0.
    pub db: i64,
    /// TLS (rustls) when set: the handshake runs inside the connect deadline, before the RESP
    /// handshake. `None` is plain TCP.
    pub tls: Option<TlsOptions>,
}

/// A 5-second connect timeout, no credentials, no name, RESP3 with fallback, database 0.
impl Default for ConnectOptions {
    fn default() -> ConnectOptions {
        ConnectOptions {
            connect_timeout: Duration::from_secs(5),
            auth: None,
            client_name: None,
            protocol: Protocol::default(),
            db: 0,
            tls: None,
        }
    }
}
