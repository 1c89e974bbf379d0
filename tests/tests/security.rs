//! TLS and ACL end to end against real servers: TLS to sentinels and data nodes (CA, client
//! certificates, server-name verification, the insecure switch), ACL users limited to what the
//! client needs, and wrong passwords reported as `auth` without the password showing anywhere.

mod common;

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use common::*;
use sentinel_recovery::{Address, Client, ErrorCode};
use sentinel_recovery_testkit::{
    wait_until, AclSpec, AclUser, Conn, Reply, SlowDns, TlsSpec, Topology, TopologySpec,
};

// ---------------------------------------------------------------------------------------------
// Everything the core logs, at every level, goes into one buffer, so tests can prove a secret
// never reaches a log line. The core logs from its own threads: only a global subscriber sees it.

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs the capturing subscriber once for this test binary and returns its buffer.
fn logs() -> &'static Captured {
    static LOGS: OnceLock<Captured> = OnceLock::new();
    LOGS.get_or_init(|| {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing_subscriber::filter::LevelFilter::TRACE)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing_subscriber::util::SubscriberInitExt::try_init(subscriber)
            .expect("no other global subscriber in this test binary");
        captured
    })
}

fn log_text() -> String {
    String::from_utf8_lossy(&logs().0.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
}

// ---------------------------------------------------------------------------------------------

fn tls_spec(require_client_cert: bool) -> TopologySpec {
    TopologySpec {
        replicas: 1,
        sentinels: 2,
        quorum: 1,
        tls: Some(TlsSpec {
            require_client_cert,
        }),
        ..TopologySpec::default()
    }
}

/// The client-facing (TLS) address of a node, as the core reports it.
fn tls_addr(node: &sentinel_recovery_testkit::Node) -> Address {
    Address::new("127.0.0.1", node.client_port())
}

/// `rediss+sentinel://` over the sentinels' TLS ports with only the given query.
fn bare_tls_url(topo: &Topology, query: &str) -> String {
    let addrs: Vec<String> = topo.sentinels().iter().map(|s| s.client_addr()).collect();
    format!(
        "rediss+sentinel://{}/{}?{query}",
        addrs.join(","),
        topo.service()
    )
}

/// Awaits every future, concurrently (spawned on the test's runtime).
async fn futures_join<F>(futures: Vec<F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

fn path(p: &std::path::Path) -> String {
    p.display().to_string()
}

#[test]
fn tls_end_to_end_for_sentinels_and_data_nodes() {
    logs();
    let topo = Topology::start(tls_spec(false)).unwrap();
    let primary = topo.primary();
    assert!(primary.tls_port().is_some());
    rt().block_on(async {
        let client = Client::connect(&topo.url()).await.unwrap();
        let t = client.topology().unwrap();
        // Sentinels report the TLS ports (tls-replication yes), and ROLE over TLS verified it.
        assert_eq!(t.primary, Some(tls_addr(primary)));
        assert_eq!(t.replicas, vec![tls_addr(&topo.replicas()[0])]);
        wait_topology(&client, Duration::from_secs(10), "both sentinels", |t| {
            t.sentinels.len() == 2 && t.sentinels.iter().all(|s| s.up)
        })
        .await;
        // The data path over TLS.
        client
            .execute(&["SET", "tls-key", "tls-value"])
            .await
            .unwrap();
        let v = client.execute(&["GET", "tls-key"]).await.unwrap();
        assert_eq!(
            v.as_bytes().map(|b| b.to_vec()),
            Some(b"tls-value".to_vec())
        );
        // Larger than any TLS record or socket buffer: partial writes, then a flush of what the
        // TLS layer still holds, must all reach the server; and many requests in flight at once.
        let big = vec![b'x'; 3 * 1024 * 1024];
        client
            .execute(&[&b"SET"[..], b"tls-big", &big])
            .await
            .unwrap();
        let v = client.execute(&["STRLEN", "tls-big"]).await.unwrap();
        assert_eq!(v.as_int(), Some(big.len() as i64));
        let gets: Vec<_> = (0..200)
            .map(|_| {
                let client = client.clone();
                async move { client.execute(&["GET", "tls-key"]).await }
            })
            .collect();
        for v in futures_join(gets).await {
            assert_eq!(v.unwrap().as_bytes().map(|b| b.len()), Some(9));
        }
        // The same while the server does not read (SIGSTOP for 300 ms, well under
        // down-after-milliseconds, so no failover): the socket fills up and rustls holds records
        // back; once the server reads again, all of it must still go out.
        let huge = vec![b'y'; 24 * 1024 * 1024];
        primary.stop();
        let write = {
            let client = client.clone();
            tokio::spawn(async move { client.execute(&[&b"SET"[..], b"tls-huge", &huge]).await })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        primary.cont();
        tokio::time::timeout(Duration::from_secs(20), write)
            .await
            .expect("the big write finished")
            .unwrap()
            .unwrap();
        client.close().await;
    });
    // The write reached the primary (read back over the testkit's plain control port).
    assert_eq!(
        primary
            .cmd(&["GET", "tls-key"])
            .unwrap()
            .as_str()
            .as_deref(),
        Some("tls-value")
    );
    // A plain client cannot talk to the TLS ports: the topology really is TLS.
    let plain = topo.url().replacen("rediss+sentinel", "redis+sentinel", 1);
    let plain = plain.split('?').next().unwrap().to_string();
    let err = rt()
        .block_on(Client::connect(&url_with(
            &plain,
            "sentinel_timeout_ms=1000",
        )))
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::SentinelsUnreachable, "{err}");
}

#[test]
fn tls_verification_failures_are_tls_errors_until_fixed() {
    logs();
    let topo = Topology::start(tls_spec(false)).unwrap();
    let files = topo.tls_files().unwrap().clone();
    let primary = tls_addr(topo.primary());

    // A CA that signed nothing here: every sentinel fails verification.
    let wrong_ca = bare_tls_url(
        &topo,
        &format!(
            "tls_ca_file={}&sentinel_timeout_ms=2000",
            path(&files.other_ca_cert)
        ),
    );
    let err = rt().block_on(Client::connect(&wrong_ca)).unwrap_err();
    assert!(err.code() == ErrorCode::Tls, "{err}");
    assert!(
        err.message().contains("TLS handshake") && err.message().contains("UnknownIssuer"),
        "{err}"
    );

    // The explicit insecure switch accepts the unknown CA, for sentinels and data nodes.
    let insecure = format!("{wrong_ca}&tls_insecure=true");
    rt().block_on(async {
        let client = Client::connect(&insecure).await.unwrap();
        assert_eq!(client.topology().unwrap().primary, Some(primary.clone()));
        client.close().await;
    });

    // A name that is not in the certificate (SAN: 127.0.0.1 and localhost only).
    let dns = SlowDns::start(&[(
        "sentinels.sr.test",
        IpAddr::V4(Ipv4Addr::LOCALHOST),
        Duration::ZERO,
    )])
    .unwrap();
    let by_name: Vec<String> = topo
        .sentinels()
        .iter()
        .map(|s| format!("sentinels.sr.test:{}", s.client_port()))
        .collect();
    let named = format!(
        "rediss+sentinel://{}/{}?tls_ca_file={}&dns_server={}&sentinel_timeout_ms=2000",
        by_name.join(","),
        topo.service(),
        path(&files.ca_cert),
        dns.addr()
    );
    let err = rt().block_on(Client::connect(&named)).unwrap_err();
    assert!(
        err.message().contains("sentinels.sr.test") && err.message().contains("not valid for name"),
        "{err}"
    );
    // tls_server_name names what the certificate says; it applies to the data nodes too.
    rt().block_on(async {
        let client = Client::connect(&format!("{named}&tls_server_name=localhost"))
            .await
            .unwrap();
        assert_eq!(client.topology().unwrap().primary, Some(primary.clone()));
        client.execute(&["PING"]).await.unwrap();
        client.close().await;
    });

    // A CA file that does not exist is reported at open time, naming the option and the file.
    let missing = bare_tls_url(&topo, "tls_ca_file=/nonexistent/sr-ca.pem");
    let err = rt().block_on(Client::connect(&missing)).unwrap_err();
    assert_eq!(err.code(), ErrorCode::Tls, "{err}");
    assert!(
        err.message().contains("tls_ca_file") && err.message().contains("/nonexistent/sr-ca.pem"),
        "{err}"
    );
}

#[test]
fn mutual_tls_needs_the_client_certificate_on_each_side() {
    logs();
    let topo = Topology::start(tls_spec(true)).unwrap();
    let files = topo.tls_files().unwrap().clone();
    // topo.url() carries tls_cert_file / tls_key_file: both sides present the certificate.
    rt().block_on(async {
        let client = Client::connect(&topo.url()).await.unwrap();
        assert_eq!(
            client.topology().unwrap().primary,
            Some(tls_addr(topo.primary()))
        );
        client.execute(&["SET", "mtls", "1"]).await.unwrap();
        client.close().await;
    });

    // Without a client certificate, the sentinels refuse the handshake.
    let no_cert = bare_tls_url(
        &topo,
        &format!(
            "tls_ca_file={}&sentinel_timeout_ms=2000",
            path(&files.ca_cert)
        ),
    );
    let err = rt().block_on(Client::connect(&no_cert)).unwrap_err();
    assert!(err.code() == ErrorCode::Tls, "{err}");
    assert!(err.message().contains("TLS"), "{err}");

    // Sentinel-only certificate: sentinels answer, the data nodes refuse the handshake, so no
    // primary can be verified. Shows the two sides are configured separately.
    let sentinel_only = format!(
        "{no_cert}&sentinel_tls_cert_file={}&sentinel_tls_key_file={}",
        path(&files.client_cert),
        path(&files.client_key)
    );
    let err = rt().block_on(Client::connect(&sentinel_only)).unwrap_err();
    assert!(err.code() == ErrorCode::Tls, "{err}");
    assert!(err.message().contains("TLS"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// ACL

/// What the client sends to a sentinel, and nothing more (Redis 7.0 checks subcommands and pub/sub
/// channels per user; HELLO and AUTH need no permission). `client|setname` is for the RESP2
/// fallback with a client name; GET-MASTER-ADDR-BY-NAME is the fallback where MASTER is refused.
///
/// The promotion channels (`+failover-state-send-slaveof-noone`, `-failover-abort-*`) let the
/// client fence writes while a replica is promoted; `INFO` tells a sentinel in TILT.
use sentinel_recovery_testkit::security::SENTINEL_WATCHER_RULES as SENTINEL_RULES;

/// An application user on data nodes: keys and data commands, plus ROLE for verification (ROLE
/// is in @admin and @dangerous).
const DATA_RULES: &str = "~* resetchannels -@all +@read +@write +@connection +role";

const WATCHER_PW: &str = "w4tcher-Pw";
const APP_PW: &str = "app-Pw-7";

fn acl_spec() -> TopologySpec {
    TopologySpec {
        replicas: 1,
        sentinels: 2,
        quorum: 1,
        acl: Some(AclSpec {
            data_users: vec![AclUser::new("app", APP_PW, DATA_RULES)],
            sentinel_users: vec![AclUser::new("watcher", WATCHER_PW, SENTINEL_RULES)],
        }),
        ..TopologySpec::default()
    }
}

/// Runs `args` on `node` authenticated as `user`, over the plain control port.
fn as_user(node: &sentinel_recovery_testkit::Node, user: &str, pw: &str, args: &[&str]) -> Reply {
    let mut conn = Conn::connect(&node.addr(), Duration::from_secs(2)).unwrap();
    let auth = conn.call(&["AUTH", user, pw]).unwrap();
    assert!(!auth.is_error(), "AUTH as {user}: {auth:?}");
    conn.call(args).unwrap()
}

/// Entries of `ACL LOG` on `node` (denied commands, keys, channels; failed logins).
fn acl_log(
    node: &sentinel_recovery_testkit::Node,
) -> Vec<std::collections::HashMap<String, String>> {
    let reply = node.cmd(&["ACL", "LOG"]).unwrap();
    reply
        .as_array()
        .unwrap_or(&[])
        .iter()
        .filter_map(Reply::to_map)
        .collect()
}

#[test]
fn acl_users_limited_to_what_the_client_needs_work() {
    logs();
    let topo = Topology::start(acl_spec()).unwrap();
    // The users really are limited, and the default user is off.
    let s0 = &topo.sentinels()[0];
    let denied = as_user(
        s0,
        "watcher",
        WATCHER_PW,
        &["SENTINEL", "FAILOVER", "mymaster"],
    );
    assert!(
        matches!(&denied, Reply::Error(e) if e.starts_with("NOPERM")),
        "{denied:?}"
    );
    let denied = as_user(topo.primary(), "app", APP_PW, &["CONFIG", "GET", "port"]);
    assert!(
        matches!(&denied, Reply::Error(e) if e.starts_with("NOPERM")),
        "{denied:?}"
    );
    let mut anon = Conn::connect(&topo.primary().addr(), Duration::from_secs(2)).unwrap();
    assert!(anon.call(&["PING"]).unwrap().is_error());
    for n in topo.sentinels().iter().chain(topo.data_nodes()) {
        n.cmd(&["ACL", "LOG", "RESET"]).unwrap();
    }

    // RESP3 (HELLO 3 AUTH ... SETNAME) and RESP2 (AUTH, CLIENT SETNAME) handshakes.
    for (i, extra) in ["protocol=3&client_name=acl3", "protocol=2&client_name=acl2"]
        .iter()
        .enumerate()
    {
        let url = format!(
            "{}&{extra}",
            topo.url_with(
                Some(("app", APP_PW)),
                Some(("watcher", WATCHER_PW)),
                &[("check_interval_ms", "200")]
            )
        );
        rt().block_on(async {
            let client = Client::connect(&url).await.unwrap();
            let t = client.topology().unwrap();
            assert_eq!(t.primary, Some(addr(topo.primary())));
            assert_eq!(t.replicas, vec![addr(&topo.replicas()[0])]);
            let key = format!("acl-key-{i}");
            client.execute(&["SET", key.as_str(), "v"]).await.unwrap();
            let v = client.execute(&["GET", key.as_str()]).await.unwrap();
            assert_eq!(v.as_bytes().map(|b| b.to_vec()), Some(b"v".to_vec()));
            // The monitor subscribed to sentinel events as watcher, and ran backstop rounds.
            wait_until(Duration::from_secs(10), "a watcher subscription", || {
                topo.sentinels()
                    .iter()
                    .flat_map(|s| s.client_list())
                    .any(|c| {
                        c.get("user").map(String::as_str) == Some("watcher")
                            && c.get("sub").is_some_and(|n| n != "0")
                    })
                    .then_some(())
            })
            .unwrap();
            wait_topology(&client, Duration::from_secs(10), "sentinels seen up", |t| {
                t.sentinels.len() == 2 && t.sentinels.iter().all(|s| s.up)
            })
            .await;
            client.close().await;
        });
    }
    // Nothing the client did was refused by an ACL on any node.
    for n in topo.sentinels().iter().chain(topo.data_nodes()) {
        let log = acl_log(n);
        assert!(log.is_empty(), "ACL LOG on {}: {log:#?}", n.port());
    }
}

#[test]
fn wrong_passwords_are_auth_errors_and_never_leak() {
    logs();
    let topo = Topology::start(acl_spec()).unwrap();
    const WRONG_DATA: &str = "Wrong-Data-Secret-1f9c";
    const WRONG_SENTINEL: &str = "Wrong-Sentinel-Secret-77ab";

    // Wrong data password: sentinels answer, the primary refuses the credentials.
    let url = topo.url_with(
        Some(("app", WRONG_DATA)),
        Some(("watcher", WATCHER_PW)),
        &[],
    );
    let err = rt().block_on(Client::connect(&url)).unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains(WRONG_DATA), "{shown}");
    assert!(shown.contains("WRONGPASS"), "{shown}");
    assert_eq!(err.code(), ErrorCode::Auth, "{err}");
    // A command on a client opened anyway fails with the same code, not a queue timeout.
    let err = rt()
        .block_on(async {
            let client = Client::open_url(&format!("{url}&command_timeout_ms=60000")).unwrap();
            let _ = client.ready().await;
            let result = client.execute(&["GET", "k"]).await;
            client.close().await;
            result
        })
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::Auth, "{err}");
    assert!(!format!("{err:?}").contains(WRONG_DATA));

    // Wrong sentinel password: no sentinel lets the client in.
    let url = topo.url_with(
        Some(("app", APP_PW)),
        Some(("watcher", WRONG_SENTINEL)),
        &[],
    );
    let err = rt().block_on(Client::connect(&url)).unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains(WRONG_SENTINEL), "{shown}");
    assert!(shown.contains("WRONGPASS"), "{shown}");
    assert_eq!(err.code(), ErrorCode::Auth, "{err}");

    // Nor in any log line, at any level (the right passwords neither).
    let text = log_text();
    assert!(!text.is_empty(), "the capturing subscriber saw nothing");
    for secret in [WRONG_DATA, WRONG_SENTINEL, APP_PW, WATCHER_PW] {
        assert!(!text.contains(secret), "{secret} in the logs");
    }
}
