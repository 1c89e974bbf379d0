//! The connection against scripted servers.

use super::*;
use crate::error::ErrorCode;
use crate::resp::test_server::{bulk, Action, MockServer};

fn resp2() -> ConnectOptions {
    ConnectOptions {
        protocol: Protocol::Resp2,
        ..ConnectOptions::default()
    }
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or("<not a string>")
}

#[tokio::test]
async fn pipelines_concurrent_requests_in_order() {
    let server = MockServer::start(|cmd| {
        Action::Reply(bulk(&String::from_utf8_lossy(&cmd[1])).into_bytes())
    })
    .await;
    let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
    let tasks: Vec<_> = (0..100)
        .map(|i| {
            let conn = conn.clone();
            tokio::spawn(async move {
                let reply = conn.request(&["ECHO", &format!("msg-{i}")]).await;
                (i, reply)
            })
        })
        .collect();
    for task in tasks {
        let (i, reply) = task.await.unwrap();
        assert_eq!(text(&reply.unwrap()), format!("msg-{i}"));
    }
    drop(conn);
    let log = server.finish().await;
    assert_eq!(log.commands.len(), 100);
    assert!(
        log.max_per_read > 1,
        "requests were not batched: {}",
        log.max_per_read
    );
}

#[tokio::test]
async fn server_closing_mid_reply_fails_pending_and_later_requests() {
    let mut n = 0;
    let server = MockServer::start(move |_| {
        n += 1;
        if n == 1 {
            Action::reply("+first\r\n")
        } else {
            Action::Close(b"$10\r\nabc".to_vec())
        }
    })
    .await;
    let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
    let (a, b, c) = tokio::join!(
        conn.request(&["GET", "a"]),
        conn.request(&["GET", "b"]),
        conn.request(&["GET", "c"])
    );
    assert_eq!(text(&a.unwrap()), "first");
    for r in [b, c] {
        let e = r.unwrap_err();
        assert_eq!(e.code(), ErrorCode::ConnectionLost, "{e}");
        assert!(e.message().contains(&server.addr.to_string()), "{e}");
    }
    tokio::time::timeout(Duration::from_secs(2), conn.closed())
        .await
        .unwrap();
    assert!(conn.is_closed());
    let e = conn.request(&["PING"]).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::ConnectionLost);
}

#[tokio::test]
async fn malformed_reply_is_a_protocol_error() {
    let server = MockServer::start(|_| Action::reply("?garbage\r\n")).await;
    let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
    let (a, b) = tokio::join!(conn.request(&["PING"]), conn.request(&["PING"]));
    for r in [a, b] {
        assert_eq!(r.unwrap_err().code(), ErrorCode::Protocol);
    }
    tokio::time::timeout(Duration::from_secs(2), conn.closed())
        .await
        .unwrap();
    assert_eq!(
        conn.request(&["PING"]).await.unwrap_err().code(),
        ErrorCode::ConnectionLost
    );
}

#[tokio::test]
async fn resp3_types_are_refused_on_resp2() {
    let server = MockServer::start(|_| Action::reply("%1\r\n+a\r\n+b\r\n")).await;
    let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
    assert_eq!(
        conn.request(&["PING"]).await.unwrap_err().code(),
        ErrorCode::Protocol
    );
}

#[tokio::test]
async fn error_replies_become_server_errors_nested_ones_values() {
    let server = MockServer::start(|cmd| match cmd[0].as_slice() {
        b"EXEC" => Action::reply("*2\r\n+OK\r\n-WRONGTYPE no\r\n"),
        _ => Action::reply("-READONLY You can't write against a read only replica.\r\n"),
    })
    .await;
    let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
    let e = conn.request(&["SET", "k", "v"]).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::Server);
    assert_eq!(e.server_code(), Some("READONLY"));
    let v = conn.request(&["EXEC"]).await.unwrap();
    assert_eq!(
        v,
        Value::Array(vec![
            Value::Simple("OK".into()),
            Value::Error("WRONGTYPE no".into())
        ])
    );
    assert!(!conn.is_closed());
}

#[tokio::test]
async fn request_timeout_leaves_the_connection_usable() {
    let server = MockServer::start(|cmd| match cmd[0].as_slice() {
        b"SLOW" => Action::Silent,
        // Answers the abandoned SLOW first, as a late server would.
        _ => Action::reply("+slow\r\n+PONG\r\n"),
    })
    .await;
    let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
    let started = std::time::Instant::now();
    let e = conn
        .request_timeout(&["SLOW"], Duration::from_millis(100))
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Timeout);
    assert!(started.elapsed() < Duration::from_secs(1));
    assert!(!conn.is_closed());
    let v = conn.request(&["PING"]).await.unwrap();
    assert_eq!(
        v,
        Value::Simple("PONG".into()),
        "late reply was matched to the abandoned request"
    );
}

#[tokio::test]
async fn close_fails_pending_requests_and_is_idempotent() {
    let server = MockServer::start(|_| Action::Silent).await;
    let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
    let pending = tokio::spawn({
        let conn = conn.clone();
        async move { conn.request(&["BLPOP", "q", "0"]).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    conn.close();
    conn.close();
    let e = pending.await.unwrap().unwrap_err();
    assert_eq!(e.code(), ErrorCode::ConnectionLost);
    assert!(conn.is_closed());
    conn.closed().await;
    // The socket really closed: the server sees EOF.
    server.finish().await;
}

#[tokio::test]
async fn dropping_every_handle_ends_the_task() {
    let server = MockServer::start(|_| Action::reply("+PONG\r\n")).await;
    let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
    let watcher = conn.shared.clone();
    conn.request(&["PING"]).await.unwrap();
    drop(conn);
    server.finish().await;
    tokio::time::timeout(Duration::from_secs(2), watcher.done.cancelled())
        .await
        .unwrap();
}

#[tokio::test]
async fn connect_errors_name_the_address() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let e = Connection::connect(addr, &resp2()).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::ConnectionLost);
    assert!(e.message().contains(&addr.to_string()), "{e}");
}

#[tokio::test]
async fn subscribe_resp2() {
    let server = MockServer::start(|cmd| match cmd[0].as_slice() {
        b"SUBSCRIBE" => Action::Close(
            [
                "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n",
                "*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$5\r\nhello\r\n",
                "*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n",
                "*4\r\n$8\r\npmessage\r\n$2\r\nb*\r\n$1\r\nb\r\n$5\r\nworld\r\n",
                "*2\r\n$4\r\npong\r\n$0\r\n\r\n",
                "*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$4\r\nlast\r\n",
            ]
            .concat()
            .into_bytes(),
        ),
        _ => Action::reply("+OK\r\n"),
    })
    .await;
    let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
    let mut sub = conn
        .subscribe(&["a", "b"], Duration::from_secs(2))
        .await
        .unwrap();
    let mut got = Vec::new();
    while let Some((channel, payload)) = sub.next().await {
        got.push(format!(
            "{}={}",
            String::from_utf8_lossy(&channel),
            String::from_utf8_lossy(&payload)
        ));
    }
    assert_eq!(got, ["a=hello", "b=world", "a=last"]);
}

#[tokio::test]
async fn subscribe_resp3_and_unsolicited_pushes() {
    let server = MockServer::start(|cmd| match cmd[0].as_slice() {
        b"HELLO" => Action::reply("%1\r\n$5\r\nproto\r\n:3\r\n"),
        b"PING" => Action::reply(">2\r\n$10\r\ninvalidate\r\n*0\r\n+PONG\r\n"),
        b"SUBSCRIBE" => Action::reply(
            &[
                ">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n",
                ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$3\r\none\r\n",
            ]
            .concat(),
        ),
        _ => Action::reply("+OK\r\n"),
    })
    .await;
    let opts = ConnectOptions::default();
    let conn = Connection::connect(server.addr, &opts).await.unwrap();
    assert_eq!(conn.protocol(), Protocol::Resp3);
    assert_eq!(
        conn.request(&["PING"]).await.unwrap(),
        Value::Simple("PONG".into())
    );
    let keep = conn.clone();
    let mut sub = conn
        .subscribe(&["ch"], Duration::from_secs(2))
        .await
        .unwrap();
    let (channel, payload) = sub.next().await.unwrap();
    assert_eq!((&channel[..], &payload[..]), (&b"ch"[..], &b"one"[..]));
    keep.close();
    assert_eq!(sub.next().await, None);
}

#[tokio::test]
async fn refused_subscribe_is_an_error() {
    let server = MockServer::start(|_| {
        Action::reply("-NOPERM this user has no permissions to access the 'x' channel\r\n")
    })
    .await;
    let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
    let e = conn
        .subscribe(&["x"], Duration::from_secs(2))
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Server, "{e}");
    assert_eq!(e.server_code(), Some("NOPERM"));
}

#[tokio::test]
async fn subscribe_times_out_without_confirmation() {
    let server = MockServer::start(|_| Action::Silent).await;
    let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
    let e = conn
        .subscribe(&["x"], Duration::from_millis(100))
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Timeout, "{e}");
    server.finish().await; // closed after the failure
}

#[tokio::test]
async fn random_bytes_never_panic() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let alphabet = b"+-:$*_,#(!=%~>|?.;0123456789\r\n\r\nabc";
    for _ in 0..200 {
        let len = rng.gen_range(1..64);
        let garbage: Vec<u8> = (0..len)
            .map(|_| alphabet[rng.gen_range(0..alphabet.len())])
            .collect();
        let server = MockServer::start(move |_| Action::Close(garbage.clone())).await;
        let protocol = if rng.gen_bool(0.5) {
            Protocol::Resp2
        } else {
            Protocol::Resp3
        };
        if let Ok(conn) = Connection::connect(server.addr, &resp2()).await {
            conn.set_protocol(protocol);
            let _ = conn.request(&["PING"]).await;
            let _ = conn.request(&["PING"]).await;
        }
    }
}
