//! `sentinel-recovery proxy`: the fencing proxy as a sidecar. Any Redis client pointed at its
//! address follows the primary through failovers without Sentinel code of its own.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use sentinel_recovery::{ListenAddress, Proxy, ProxyOptions, Route};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::watch;

/// `proxy URL --listen HOST:PORT | --unix PATH [--json] [--metrics HOST:PORT] ...`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The service's URL
    pub url: String,
    /// TCP address to listen on (port 0 picks a free one); loopback unless --allow-remote
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "unix", value_parser = socket_address)]
    pub listen: Option<SocketAddr>,
    /// Unix socket to listen on (created with mode 0600)
    #[arg(long, value_name = "PATH")]
    pub unix: Option<PathBuf>,
    /// One JSON object per line instead of text
    #[arg(long)]
    pub json: bool,
    /// Serve Prometheus metrics over HTTP at this address
    #[arg(long, value_name = "HOST:PORT", value_parser = socket_address)]
    pub metrics: Option<SocketAddr>,
    /// How long requests wait for a primary during a failover [default: the URL's command timeout]
    #[arg(long, value_name = "MS")]
    pub hold_ms: Option<u64>,
    /// Most client connections at once
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub max_clients: usize,
    /// Close sessions idle this long [default: never]
    #[arg(long, value_name = "MS")]
    pub idle_timeout_ms: Option<u64>,
    /// Largest request accepted, in bytes (as proto-max-bulk-len)
    #[arg(long, value_name = "BYTES", default_value_t = 512 * 1024 * 1024)]
    pub max_request_bytes: usize,
    /// Send sessions where the URL's read_from sends reads (replicas) instead of the primary
    #[arg(long)]
    pub reads: bool,
    /// Authenticate clients that do not with the URL's data-node credentials (loopback or Unix only)
    #[arg(long)]
    pub lend_credentials: bool,
    /// Allow a --listen address that is not loopback (exposes the primary beyond this host)
    #[arg(long)]
    pub allow_remote: bool,
    /// At SIGTERM or Ctrl-C, how long replies in flight may take before sessions are closed
    #[arg(long, value_name = "MS", default_value_t = 5_000)]
    pub grace_ms: u64,
}

fn socket_address(text: &str) -> Result<SocketAddr, String> {
    text.to_socket_addrs()
        .map_err(|e| format!("{text} is not HOST:PORT ({e})"))?
        .next()
        .ok_or_else(|| format!("{text} resolves to no address"))
}

pub fn main(args: Args) -> Result<(), String> {
    let listen = match (&args.listen, &args.unix) {
        (Some(addr), None) => ListenAddress::Tcp(*addr),
        (None, Some(path)) => ListenAddress::Unix(path.clone()),
        _ => return Err("proxy needs --listen HOST:PORT or --unix PATH".into()),
    };
    let options = ProxyOptions {
        listen,
        hold: args.hold_ms.map(Duration::from_millis),
        max_clients: args.max_clients,
        idle_timeout: args.idle_timeout_ms.map(Duration::from_millis),
        max_request_bytes: args.max_request_bytes,
        route: if args.reads {
            Route::Read
        } else {
            Route::Primary
        },
        lend_credentials: args.lend_credentials,
        allow_remote: args.allow_remote,
        ..ProxyOptions::default()
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let proxy = Arc::new(
            Proxy::start_url(&args.url, options)
                .await
                .map_err(|e| e.to_string())?,
        );
        let metrics = match args.metrics {
            Some(addr) => Some(serve_metrics(addr, proxy.clone()).await?),
            None => None,
        };
        let client = proxy.client().clone();
        let mut events = client.events().map_err(|e| e.to_string())?;
        print_listening(proxy.address(), metrics, args.json);
        if let Ok(topology) = client.topology() {
            watch::print_topology(&topology, args.json);
        }
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .map_err(|e| e.to_string())?;
        loop {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => break,
                _ = terminate.recv() => break,
                event = events.next() => match event {
                    Some(event) => watch::print_event(&event, args.json),
                    None => break,
                },
            }
        }
        proxy.close(Duration::from_millis(args.grace_ms)).await;
        Ok(())
    })
}

fn print_listening(address: &ListenAddress, metrics: Option<SocketAddr>, json: bool) {
    if json {
        let mut value = serde_json::json!({
            "kind": "listening",
            "address": address.to_string(),
            "at": sentinel_recovery::unix_ms(),
        });
        if let Some(metrics) = metrics {
            value["metrics"] = metrics.to_string().into();
        }
        watch::line(&value.to_string());
    } else {
        watch::line(&format!("listening {address}"));
        if let Some(metrics) = metrics {
            watch::line(&format!("metrics http://{metrics}/metrics"));
        }
    }
}

/// The proxy's counters, read at each scrape.
#[derive(Debug)]
struct Stats(Arc<Proxy>);

impl Collector for Stats {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        use prometheus_client::metrics::MetricType::{Counter, Gauge};
        let s = self.0.stats();
        let gauge = ConstGauge::new(s.sessions_open as i64);
        gauge.encode(encoder.encode_descriptor(
            "sentinel_recovery_proxy_sessions",
            "Client connections open now",
            None,
            Gauge,
        )?)?;
        let counters: [(&str, &str, u64); 12] = [
            (
                "sessions_accepted",
                "Client connections accepted",
                s.sessions_accepted,
            ),
            (
                "sessions_refused",
                "Client connections refused past max_clients",
                s.sessions_refused,
            ),
            (
                "commands_forwarded",
                "Requests written to a data node",
                s.commands_forwarded,
            ),
            (
                "commands_held",
                "Requests that waited for a primary",
                s.commands_held,
            ),
            (
                "held_expired",
                "Held requests answered FENCED, not sent",
                s.held_expired,
            ),
            (
                "fenced_replies",
                "Write replies from a primary being demoted, answered UNCERTAIN",
                s.fenced_replies,
            ),
            (
                "not_replicated",
                "Writes answered NOTREPLICATED (wait_replicas)",
                s.not_replicated,
            ),
            (
                "moves",
                "Sessions moved to a new node with their state replayed",
                s.moves,
            ),
            (
                "sessions_closed_at_move",
                "Sessions closed because their state could not move",
                s.sessions_closed_at_move,
            ),
            (
                "primary_changes",
                "primary_changed events",
                s.primary_changes,
            ),
            (
                "upstream_errors",
                "Upstream connections that failed to open or broke",
                s.upstream_errors,
            ),
            (
                "malformed_requests",
                "Client connections closed for malformed requests",
                s.malformed_requests,
            ),
        ];
        for (name, help, value) in counters {
            let name = format!("sentinel_recovery_proxy_{name}");
            ConstCounter::new(value)
                .encode(encoder.encode_descriptor(&name, help, None, Counter)?)?;
        }
        ConstCounter::new(s.held_seconds).encode(encoder.encode_descriptor(
            "sentinel_recovery_proxy_held_seconds",
            "Time requests waited for a primary, summed",
            None,
            Counter,
        )?)?;
        Ok(())
    }
}

/// Serves `GET /metrics` (any path) in the OpenMetrics text format.
async fn serve_metrics(addr: SocketAddr, proxy: Arc<Proxy>) -> Result<SocketAddr, String> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot serve metrics on {addr}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Stats(proxy)));
    let registry = Arc::new(registry);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let registry = registry.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut chunk = [0u8; 1024];
                // Only the head is read, up to 8 KiB, within a second.
                let read = tokio::time::timeout(Duration::from_secs(1), async {
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 8192 {
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => request.extend_from_slice(&chunk[..n]),
                        }
                    }
                })
                .await;
                if read.is_err() {
                    return;
                }
                let mut body = String::new();
                let _ = prometheus_client::encoding::text::encode(&mut body, &registry);
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.write_all(body.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    Ok(local)
}
