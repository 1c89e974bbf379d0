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

/// A reply channel for [`Connection::call`] that a plain thread can wait on.
fn replies() -> (
    impl FnOnce(Result<Value>) + Send + 'static,
    std::sync::mpsc::Receiver<Result<Value>>,
) {
    let (tx, rx) = std::sync::mpsc::channel();
    (
        move |result| {
            let _ = tx.send(result);
        },
        rx,
    )
}

fn encoded<'a>(args: &'a [&'a str]) -> impl FnOnce(&mut BytesMut) + 'a {
    move |out| codec::encode_command(args, out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_from_plain_threads_are_written_by_them_and_answered_in_order() {
    let server = MockServer::start(|cmd| {
        Action::Reply(bulk(&String::from_utf8_lossy(&cmd[1])).into_bytes())
    })
    .await;
    let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    // Threads that are not the runtime's, each sending and waiting in turn, interleaved with
    // each other: every reply must reach the call it answers.
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let conn = conn.clone();
            std::thread::spawn(move || {
                for i in 0..200 {
                    let payload = format!("t{t}-{i}");
                    let (reply, rx) = replies();
                    let args = ["ECHO", payload.as_str()];
                    assert!(conn.call(encoded(&args), deadline, reply).is_ok());
                    let value = rx.recv().unwrap().unwrap();
                    assert_eq!(value.as_str(), Some(payload.as_str()));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    drop(conn);
    assert_eq!(server.finish().await.commands.len(), 800);
}

#[tokio::test]
async fn a_call_past_its_deadline_times_out_and_its_late_reply_is_dropped() {
    let server = MockServer::start(|cmd| match cmd[0].as_slice() {
        b"SLOW" => Action::Silent,
        _ => Action::reply("+slow\r\n+PONG\r\n"),
    })
    .await;
    let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let started = Instant::now();
    let queued = conn.call(
        encoded(&["SLOW"]),
        Instant::now() + Duration::from_millis(100),
        move |result| {
            let _ = tx.send(result);
        },
    );
    assert!(queued.is_ok());
    let e = rx.await.unwrap().unwrap_err();
    assert_eq!(e.code(), ErrorCode::Timeout, "{e}");
    assert!(started.elapsed() < Duration::from_secs(1));
    assert!(!conn.is_closed());
    let v = conn.request(&["PING"]).await.unwrap();
    assert_eq!(
        v,
        Value::Simple("PONG".into()),
        "late reply was matched to the timed-out call"
    );
}

#[tokio::test]
async fn an_earlier_deadline_is_watched_even_behind_a_later_one() {
    let server = MockServer::start(|_| Action::Silent).await;
    let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
    let (late, _late_rx) = replies();
    assert!(conn
        .call(
            encoded(&["A"]),
            Instant::now() + Duration::from_secs(60),
            late
        )
        .is_ok());
    let (tx, rx) = tokio::sync::oneshot::channel();
    assert!(conn
        .call(
            encoded(&["B"]),
            Instant::now() + Duration::from_millis(50),
            move |r| {
                let _ = tx.send(r);
            }
        )
        .is_ok());
    let e = tokio::time::timeout(Duration::from_secs(5), rx)
        .await
        .expect("the earlier deadline was not watched")
        .unwrap()
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Timeout);
}

#[tokio::test]
async fn a_call_on_an_ended_connection_is_given_back_unsent() {
    let server = MockServer::start(|_| Action::reply("+OK\r\n")).await;
    let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
    conn.close();
    conn.closed().await;
    let (reply, rx) = replies();
    let back = conn.call(encoded(&["SET", "k", "v"]), Instant::now(), reply);
    assert!(back.is_err(), "an ended connection accepted a call");
    assert!(
        rx.try_recv().is_err(),
        "the call was answered although given back"
    );
    let log = server.finish().await;
    assert!(log.commands.is_empty(), "{:?}", log.commands);
}

#[tokio::test]
async fn calls_in_flight_when_the_connection_ends_get_connection_lost_once() {
    let server = MockServer::start(|_| Action::Close(Vec::new())).await;
    let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..3 {
        let tx = tx.clone();
        let queued = conn.call(
            encoded(&["SET", "k", "v"]),
            Instant::now() + Duration::from_secs(10),
            move |r: Result<Value>| {
                let _ = tx.send(r);
            },
        );
        assert!(queued.is_ok());
    }
    drop(tx);
    let mut errors = Vec::new();
    while let Some(r) = rx.recv().await {
        errors.push(r.unwrap_err().code());
    }
    assert_eq!(errors, vec![ErrorCode::ConnectionLost; 3]);
}

#[test]
fn the_calling_thread_writes_to_an_idle_connection_itself() {
    use std::io::Read;
    // A server on a plain thread, and a runtime that runs only while connecting: afterwards no
    // runtime thread exists that could write, so the command reaches the server only if the
    // calling thread sent it.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut socket, _) = listener.accept().unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut seen = Vec::new();
        let mut buf = [0u8; 256];
        while !seen.ends_with(b"PING\r\n") {
            match socket.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
        seen
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let conn = rt.block_on(Connection::connect(addr, &resp2())).unwrap();
    let (reply, _rx) = replies();
    let deadline = Instant::now() + Duration::from_secs(60);
    assert!(conn.call(encoded(&["PING"]), deadline, reply).is_ok());
    assert_eq!(server.join().unwrap(), b"*1\r\n$4\r\nPING\r\n");
    drop(conn);
    drop(rt);
}
