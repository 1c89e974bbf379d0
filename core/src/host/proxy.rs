//! The fencing proxy for the bindings: started from a URL and `key=value` options (the proxy's
//! own keys, [`crate::proxy::PROXY_KEYS`], and the client's, as the URL's query takes them),
//! returning once it listens, never waiting for discovery; closed in the callback or blocking
//! form with the same guarantees as a client's close (the completion runs exactly once; after
//! it nothing of the proxy runs).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::doctor::config_from_url;
use super::guard::guarded;
use crate::error::{Error, Result};
use crate::proxy::{ListenAddress, Proxy, ProxyOptions, ProxyStats, PROXY_KEYS};
use crate::sync::Locked;

/// How long replies in flight may take at close when the binding gives no bound.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// A proxy a binding started. Cheap to share; the first close closes it, later ones complete
/// at once.
pub struct HostProxy {
    proxy: Mutex<Option<Arc<Proxy>>>,
    address: ListenAddress,
}

impl std::fmt::Debug for HostProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostProxy")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl HostProxy {
    /// Parses `url`, applies `options` (a proxy key to the proxy, any other to the client) and
    /// starts the proxy; returns once it accepts connections. Errors are `config` errors naming
    /// the key, or the bind's failure.
    pub fn start<K: AsRef<str>, V: AsRef<str>>(url: &str, options: &[(K, V)]) -> Result<HostProxy> {
        guarded(|| {
            let mut proxy_options = ProxyOptions::default();
            let mut client_options = Vec::new();
            for (key, value) in options {
                let (key, value) = (key.as_ref(), value.as_ref());
                if PROXY_KEYS.contains(&key) {
                    proxy_options.set(key, value)?;
                } else {
                    client_options.push((key, value));
                }
            }
            let config = config_from_url(url, &client_options)?;
            let proxy = Proxy::open(config, proxy_options)?;
            Ok(HostProxy {
                address: proxy.address().clone(),
                proxy: Mutex::new(Some(Arc::new(proxy))),
            })
        })
    }

    /// Where the proxy listens: `IP:PORT`, or `unix:PATH`.
    pub fn address(&self) -> &ListenAddress {
        &self.address
    }

    /// The proxy's counters; `closed` after close.
    pub fn stats(&self) -> Result<ProxyStats> {
        let proxy = self.proxy.locked().clone().ok_or_else(Error::closed)?;
        Ok(proxy.stats())
    }

    /// Stops accepting, lets replies in flight finish within `grace` (default
    /// [`DEFAULT_GRACE`]), closes every session and the proxy's client, then runs `done` on a
    /// core thread, exactly once: also when the core runtime stops before the close finished
    /// (then when its task is dropped), and at once on the calling thread when no runtime can
    /// run. A second close runs `done` at once.
    pub fn close(&self, grace: Option<Duration>, done: Box<dyn FnOnce() + Send + 'static>) {
        let done = OnceDone(Some(done));
        let Some(proxy) = self.proxy.locked().take() else {
            return; // `done` runs as it drops
        };
        let grace = grace.unwrap_or(DEFAULT_GRACE);
        match crate::runtime::handle() {
            Ok(handle) => {
                handle.spawn(async move {
                    proxy.close(grace).await;
                    drop(proxy);
                    drop(done);
                });
            }
            Err(_) => drop(proxy),
        }
    }

    /// [`HostProxy::close`], blocking the calling thread (and only it) until done. Refused with
    /// `config` on a core thread (inside a callback of the library), where waiting could stall
    /// the threads the close needs.
    pub fn close_blocking(&self, grace: Option<Duration>) -> Result<()> {
        crate::runtime::refuse_blocking_on_core_thread()?;
        let (tx, rx) = std::sync::mpsc::channel();
        self.close(
            grace,
            Box::new(move || {
                let _ = tx.send(());
            }),
        );
        let _ = rx.recv();
        Ok(())
    }
}

/// A close's completion, run exactly once: when dropped, wherever that happens (the close's
/// task finishing, or being dropped with the runtime). A panic in it is logged, never
/// propagated into the core.
struct OnceDone(Option<Box<dyn FnOnce() + Send + 'static>>);

impl Drop for OnceDone {
    fn drop(&mut self) {
        if let Some(done) = self.0.take() {
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(done)).is_err() {
                tracing::error!("a proxy close callback panicked");
            }
        }
    }
}

impl Drop for HostProxy {
    fn drop(&mut self) {
        if let Some(proxy) = self.proxy.locked().take() {
            if let Ok(handle) = crate::runtime::handle() {
                handle.spawn(async move { proxy.close(Duration::ZERO).await });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_go_to_the_proxy_or_the_client_and_bad_ones_are_refused() {
        let url = "redis+sentinel://127.0.0.1:1/svc";
        let e = HostProxy::start(url, &[("listen", "10.0.0.1:0")]).unwrap_err();
        assert!(e.message().contains("allow_remote"), "{e}");
        let e = HostProxy::start(url, &[("command_timeout_ms", "x")]).unwrap_err();
        assert!(e.message().contains("command_timeout_ms"), "{e}");
        let proxy =
            HostProxy::start(url, &[("listen", "127.0.0.1:0"), ("hold_ms", "100")]).unwrap();
        assert!(matches!(proxy.address(), ListenAddress::Tcp(a) if a.port() != 0));
        proxy
            .close_blocking(Some(Duration::from_millis(100)))
            .unwrap();
        assert_eq!(proxy.stats().unwrap_err().code(), crate::ErrorCode::Closed);
        // A second close completes too.
        proxy.close_blocking(None).unwrap();
    }
}
