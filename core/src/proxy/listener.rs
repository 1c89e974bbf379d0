//! The proxy's listening socket: TCP or Unix, bound on the caller's thread (so a bad address
//! fails `start` at once), accepting on the runtime while the proxy lives, also during a
//! failover (a client that reconnects at once lands on the new primary).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use futures_util::FutureExt;
use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::options::{ListenAddress, ProxyOptions};
use super::shared::ProxyState;
use super::stats::Counters;
use super::upstream::Stream;
use super::{replies, session};
use crate::error::{Error, ErrorCode, Result};

/// A bound listener.
pub(super) enum Bound {
    Tcp(tokio::net::TcpListener),
    #[cfg(unix)]
    Unix(tokio::net::UnixListener),
}

/// Binds `options.listen`; must run inside the runtime's context. Returns the address as bound.
pub(super) fn bind(options: &ProxyOptions) -> Result<(Bound, ListenAddress)> {
    match &options.listen {
        ListenAddress::Tcp(addr) => {
            let std = std::net::TcpListener::bind(addr).map_err(|e| {
                Error::new(
                    ErrorCode::Config,
                    format!("proxy cannot listen on {addr}: {e}"),
                )
            })?;
            std.set_nonblocking(true)?;
            let local = std.local_addr()?;
            let listener = tokio::net::TcpListener::from_std(std)?;
            Ok((Bound::Tcp(listener), ListenAddress::Tcp(local)))
        }
        #[cfg(unix)]
        ListenAddress::Unix(path) => {
            use std::os::unix::fs::{FileTypeExt, PermissionsExt};
            // A socket file left by a proxy that died is replaced; one something answers on,
            // or any other file, is not.
            if let Ok(meta) = std::fs::symlink_metadata(path) {
                let stale = meta.file_type().is_socket()
                    && std::os::unix::net::UnixStream::connect(path).is_err();
                if !stale {
                    return Err(Error::config(format!(
                        "proxy cannot listen on {}: the path exists",
                        path.display()
                    )));
                }
                let _ = std::fs::remove_file(path);
            }
            let std = std::os::unix::net::UnixListener::bind(path).map_err(|e| {
                Error::config(format!("proxy cannot listen on {}: {e}", path.display()))
            })?;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(options.unix_mode))?;
            std.set_nonblocking(true)?;
            let listener = tokio::net::UnixListener::from_std(std)?;
            Ok((Bound::Unix(listener), ListenAddress::Unix(path.clone())))
        }
        #[cfg(not(unix))]
        ListenAddress::Unix(_) => Err(Error::config(
            "proxy Unix sockets are not available on this platform",
        )),
    }
}

/// Accepts until the proxy closes; each connection becomes a session on its own task.
pub(super) async fn accept(
    bound: Bound,
    shared: Arc<ProxyState>,
    tracker: TaskTracker,
    kill: CancellationToken,
) {
    let closing = shared.closing.clone();
    loop {
        let accepted: std::io::Result<Box<dyn Stream>> = tokio::select! {
            _ = closing.cancelled() => return,
            _ = kill.cancelled() => return,
            accepted = next(&bound) => accepted,
        };
        let stream = match accepted {
            Ok(stream) => stream,
            Err(e) => {
                // Out of descriptors, or a connection reset before it was taken: keep going,
                // after a pause so an exhausted table is not spun on.
                tracing::warn!(error = %e, "proxy: accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                continue;
            }
        };
        let counters = &shared.counters;
        if counters.sessions_open.load(Ordering::Relaxed) >= shared.options.max_clients as u64 {
            Counters::add(&counters.sessions_refused, 1);
            tracker.spawn(refuse(stream));
            continue;
        }
        Counters::add(&counters.sessions_accepted, 1);
        let shared = shared.clone();
        let kill = kill.clone();
        tracker.spawn(async move {
            // A panic ends this session only (its connection closes); nothing else notices.
            let session = std::panic::AssertUnwindSafe(session::run(shared, stream)).catch_unwind();
            tokio::select! {
                ended = session => if ended.is_err() {
                    tracing::error!("proxy: a session panicked; its connection was closed");
                },
                _ = kill.cancelled() => {}
            }
        });
    }
}

async fn next(bound: &Bound) -> std::io::Result<Box<dyn Stream>> {
    match bound {
        Bound::Tcp(listener) => {
            let (stream, _) = listener.accept().await?;
            let _ = stream.set_nodelay(true);
            Ok(Box::new(stream))
        }
        #[cfg(unix)]
        Bound::Unix(listener) => {
            let (stream, _) = listener.accept().await?;
            Ok(Box::new(stream))
        }
    }
}

/// Redis' answer past `maxclients`: the error, then the connection closed.
async fn refuse(mut stream: Box<dyn Stream>) {
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), async {
        let _ = stream.write_all(replies::MAX_CLIENTS).await;
        let _ = stream.shutdown().await;
    })
    .await;
}
