//! The connection against a real `redis-server` 7 and a real sentinel.
//!
//! Each test starts its own processes on free ports in a fresh directory and kills them (by their
//! own pid, through `Child`) when it ends, even on failure.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::config::{Credentials, Protocol, Secret};
use crate::error::ErrorCode;
use crate::resp::{ConnectOptions, Connection, Value};

const REDIS_SERVER: &str = "/usr/bin/redis-server";

/// A redis-server process and its directory, both gone when dropped.
struct Server {
    child: Child,
    dir: PathBuf,
    addr: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn fresh_dir(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "sr-resp-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Starts `redis-server` with `args` (after the config file, if any) and waits until it accepts.
async fn start(tag: &str, config: Option<String>, args: &[&str]) -> Option<Server> {
    if !std::path::Path::new(REDIS_SERVER).exists() {
        eprintln!("skipping: {REDIS_SERVER} not installed");
        return None;
    }
    let dir = fresh_dir(tag);
    let port = free_port();
    let mut cmd = Command::new(REDIS_SERVER);
    if let Some(config) = config {
        let path = dir.join("server.conf");
        std::fs::write(
            &path,
            format!("port {port}\ndir {}\n{config}", dir.display()),
        )
        .unwrap();
        cmd.arg(&path);
    } else {
        cmd.args(["--port", &port.to_string(), "--dir"]).arg(&dir);
    }
    cmd.args(["--save", "", "--appendonly", "no", "--bind", "127.0.0.1"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let child = cmd.spawn().unwrap();
    let server = Server {
        child,
        dir,
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while tokio::net::TcpStream::connect(server.addr).await.is_err() {
        assert!(Instant::now() < deadline, "{tag} did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Some(server)
}

fn opts(protocol: Protocol) -> ConnectOptions {
    ConnectOptions {
        connect_timeout: Duration::from_secs(5),
        protocol,
        ..ConnectOptions::default()
    }
}

fn s(v: &Value) -> String {
    v.as_str().unwrap_or("<none>").to_owned()
}

#[tokio::test]
async fn redis_resp3_and_resp2() {
    let Some(redis) = start("redis", None, &[]).await else {
        return;
    };
    let named = ConnectOptions {
        client_name: Some("sr-test".into()),
        db: 3,
        ..opts(Protocol::Resp3)
    };
    let c3 = Connection::connect(redis.addr, &named).await.unwrap();
    assert_eq!(c3.protocol(), Protocol::Resp3);
    assert_eq!(
        s(&c3.request(&["CLIENT", "GETNAME"]).await.unwrap()),
        "sr-test"
    );
    c3.request(&["HSET", "h", "f1", "1", "f2", "2"])
        .await
        .unwrap();
    c3.request(&["SET", "k", "in-db-3"]).await.unwrap();
    let map = c3.request(&["HGETALL", "h"]).await.unwrap();
    assert!(matches!(map, Value::Map(_)), "{map:?}");
    assert_eq!(map.into_pairs().unwrap().len(), 2);
    assert_eq!(c3.request(&["GET", "missing"]).await.unwrap(), Value::Nil);
    let e = c3.request(&["INCR", "h"]).await.unwrap_err();
    assert_eq!(e.server_code(), Some("WRONGTYPE"));

    // 200 pipelined requests from concurrent tasks.
    let tasks: Vec<_> = (0..200)
        .map(|i| {
            let c = c3.clone();
            tokio::spawn(async move { (i, c.request(&["ECHO", &i.to_string()]).await) })
        })
        .collect();
    for t in tasks {
        let (i, r) = t.await.unwrap();
        assert_eq!(r.unwrap().as_int(), Some(i));
    }

    let c2 = Connection::connect(redis.addr, &opts(Protocol::Resp2))
        .await
        .unwrap();
    assert_eq!(c2.protocol(), Protocol::Resp2);
    assert_eq!(c2.request(&["GET", "missing"]).await.unwrap(), Value::Nil);
    assert_eq!(
        c2.request(&["GET", "k"]).await.unwrap(),
        Value::Nil,
        "db 0 is not db 3"
    );
    c2.request(&["SELECT", "3"]).await.unwrap();
    assert_eq!(s(&c2.request(&["GET", "k"]).await.unwrap()), "in-db-3");
    let flat = c2.request(&["HGETALL", "h"]).await.unwrap();
    assert!(matches!(flat, Value::Array(_)), "{flat:?}");
    let pairs = flat.into_pairs().unwrap();
    assert!(pairs
        .iter()
        .any(|(k, v)| s(k) == "f2" && v.as_int() == Some(2)));
    let exec = {
        c2.request(&["MULTI"]).await.unwrap();
        c2.request(&["INCR", "k"]).await.unwrap();
        c2.request(&["EXEC"]).await.unwrap()
    };
    assert!(
        matches!(&exec, Value::Array(items) if matches!(items[0], Value::Error(_))),
        "{exec:?}"
    );

    // Pub/sub on both protocols.
    for protocol in [Protocol::Resp2, Protocol::Resp3] {
        let sub_conn = Connection::connect(redis.addr, &opts(protocol))
            .await
            .unwrap();
        let mut sub = sub_conn
            .subscribe(&["chan-a", "chan-b"], Duration::from_secs(2))
            .await
            .unwrap();
        let n = c3.request(&["PUBLISH", "chan-b", "payload"]).await.unwrap();
        assert_eq!(n.as_int(), Some(1), "{protocol:?}");
        let (channel, payload) = tokio::time::timeout(Duration::from_secs(2), sub.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (&channel[..], &payload[..]),
            (&b"chan-b"[..], &b"payload"[..])
        );
    }

    // A killed client connection is noticed.
    let victim = Connection::connect(redis.addr, &named).await.unwrap();
    c3.request(&["CLIENT", "KILL", "SKIPME", "yes", "TYPE", "normal"])
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(2), victim.closed())
        .await
        .unwrap();
    assert_eq!(
        victim.request(&["PING"]).await.unwrap_err().code(),
        ErrorCode::ConnectionLost
    );
}

#[tokio::test]
async fn redis_with_password() {
    let Some(redis) = start("auth", None, &["--requirepass", "s3cr3t-pw"]).await else {
        return;
    };
    for protocol in [Protocol::Resp3, Protocol::Resp2] {
        let good = ConnectOptions {
            auth: Some(Credentials {
                username: None,
                password: Secret::new("s3cr3t-pw"),
            }),
            client_name: Some("authed".into()),
            ..opts(protocol)
        };
        let c = Connection::connect(redis.addr, &good).await.unwrap();
        assert_eq!(c.protocol(), protocol);
        assert_eq!(
            s(&c.request(&["CLIENT", "GETNAME"]).await.unwrap()),
            "authed"
        );

        let bad = ConnectOptions {
            auth: Some(Credentials {
                username: Some("default".into()),
                password: Secret::new("wrong-pw-123"),
            }),
            ..opts(protocol)
        };
        let e = Connection::connect(redis.addr, &bad).await.unwrap_err();
        assert_eq!(e.code(), ErrorCode::Auth, "{e}");
        assert!(!e.to_string().contains("wrong-pw-123"), "{e}");

        let none = Connection::connect(redis.addr, &opts(protocol)).await;
        match (protocol, none) {
            // HELLO without AUTH is refused with NOAUTH.
            (Protocol::Resp3, r) => assert_eq!(r.unwrap_err().code(), ErrorCode::Auth),
            // Without a handshake the connection opens; commands are refused.
            (Protocol::Resp2, r) => {
                let e = r.unwrap().request(&["GET", "x"]).await.unwrap_err();
                assert_eq!(e.code(), ErrorCode::Auth, "{e}");
            }
        }
    }
}

#[tokio::test]
async fn sentinel_handshake_and_events() {
    let Some(redis) = start("sentinel-primary", None, &[]).await else {
        return;
    };
    let config = format!(
        "sentinel monitor m 127.0.0.1 {} 1\nsentinel down-after-milliseconds m 5000\n",
        redis.addr.port()
    );
    let Some(sentinel) = start("sentinel", Some(config), &["--sentinel"]).await else {
        return;
    };
    for protocol in [Protocol::Resp3, Protocol::Resp2] {
        let options = ConnectOptions {
            client_name: Some("sr-sentinel-test".into()),
            ..opts(protocol)
        };
        let c = Connection::connect(sentinel.addr, &options).await.unwrap();
        assert_eq!(c.protocol(), protocol);
        let master = c.request(&["SENTINEL", "MASTER", "m"]).await.unwrap();
        let pairs = master.into_pairs().expect("SENTINEL MASTER gives pairs");
        let field = |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| k.as_str() == Some(name))
                .map(|(_, v)| v.clone())
        };
        assert_eq!(field("name").map(|v| s(&v)), Some("m".to_owned()));
        assert_eq!(
            field("port").and_then(|v| v.as_int()),
            Some(i64::from(redis.addr.port()))
        );
        let e = c
            .request(&["SENTINEL", "MASTER", "nope"])
            .await
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::Server);

        // Sentinel events arrive through a subscription.
        let sub_conn = Connection::connect(sentinel.addr, &options).await.unwrap();
        let mut sub = sub_conn
            .subscribe(&["+reset-master"], Duration::from_secs(2))
            .await
            .unwrap();
        c.request(&["SENTINEL", "RESET", "m"]).await.unwrap();
        let (channel, payload) = tokio::time::timeout(Duration::from_secs(5), sub.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&channel[..], b"+reset-master");
        assert!(payload.starts_with(b"master m "), "{payload:?}");
    }
}
