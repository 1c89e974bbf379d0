//! The connection against scripted servers.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::time::Instant;

use super::read_side::ReadState;
use super::*;
use crate::error::{ErrorCode, Result};
use crate::resp::test_server::{bulk, Action, MockServer};
use crate::resp::{codec, Value};
use crate::sync::Locked;
use crate::types::Protocol;

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
                    assert!(conn
                        .call(encoded(&args), deadline, reply, Reading::Task)
                        .is_ok());
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
        Reading::Task,
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
            late,
            Reading::Task
        )
        .is_ok());
    let (tx, rx) = tokio::sync::oneshot::channel();
    assert!(conn
        .call(
            encoded(&["B"]),
            Instant::now() + Duration::from_millis(50),
            move |r| {
                let _ = tx.send(r);
            },
            Reading::Task
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
    let back = conn.call(
        encoded(&["SET", "k", "v"]),
        Instant::now(),
        reply,
        Reading::Task,
    );
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
            Reading::Task,
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
    assert!(conn
        .call(encoded(&["PING"]), deadline, reply, Reading::Task)
        .is_ok());
    assert_eq!(server.join().unwrap(), b"*1\r\n$4\r\nPING\r\n");
    drop(conn);
    drop(rt);
}

/// Sends `args` on `conn`, idle, asking to read the reply here: the [`OwnReply`] it must offer.
fn call_own(conn: &Connection, args: &[&str], deadline: Instant, reply: impl Reply) -> OwnReply {
    match conn.call(encoded(args), deadline, reply, Reading::Offer) {
        Ok(Some(own)) => own,
        Ok(None) => panic!("an idle connection did not offer the reply to the thread that wrote"),
        Err(_) => panic!("the connection had ended"),
    }
}

/// A plain-thread server that answers each `PING` it reads with `+PONG`, until the client goes.
fn pong_server() -> (SocketAddr, std::thread::JoinHandle<()>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut socket, _) = listener.accept().unwrap();
        let mut seen = Vec::new();
        let mut buf = [0u8; 256];
        loop {
            match socket.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
            while let Some(at) = seen.windows(6).position(|w| w == b"PING\r\n") {
                seen.drain(..at + 6);
                if socket.write_all(b"+PONG\r\n").is_err() {
                    return;
                }
            }
        }
    });
    (addr, server)
}

/// What a scripted server has read from its client so far.
struct Seen(Vec<u8>);

impl Seen {
    /// Reads from `socket` until `needle` has been seen; panics if the client goes away.
    fn wait_for(&mut self, socket: &mut std::net::TcpStream, needle: &[u8]) {
        use std::io::Read;
        let mut buf = [0u8; 256];
        while !self.0.windows(needle.len()).any(|w| w == needle) {
            match socket.read(&mut buf) {
                Ok(0) | Err(_) => panic!("client went away"),
                Ok(n) => self.0.extend_from_slice(&buf[..n]),
            }
        }
    }
}

/// A plain-thread server that accepts one client and plays `script` on its socket.
fn scripted_server(
    script: impl FnOnce(std::net::TcpStream, Seen) + Send + 'static,
) -> (SocketAddr, std::thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (socket, _) = listener.accept().unwrap();
        script(socket, Seen(Vec::new()));
    });
    (addr, server)
}

#[test]
fn a_waiting_thread_reads_its_own_reply() {
    // As above, no runtime thread runs after the connect: the reply reaches the call only if
    // the calling thread read it, and the call's `Reply` runs on this thread.
    let (addr, server) = pong_server();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let conn = rt.block_on(Connection::connect(addr, &resp2())).unwrap();
    for _ in 0..3 {
        let me = std::thread::current().id();
        let (tx, rx) = std::sync::mpsc::channel();
        let reply = move |result: Result<Value>| {
            let _ = tx.send((std::thread::current().id(), result));
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        let own = call_own(&conn, &["PING"], deadline, reply);
        assert!(own.read(std::time::Instant::now() + Duration::from_secs(10), None));
        let (thread, result) = rx.try_recv().expect("read() returned before the reply ran");
        assert_eq!(thread, me);
        assert_eq!(result.unwrap(), Value::Simple("PONG".into()));
    }
    drop(conn);
    drop(rt);
    server.join().unwrap();
}

#[test]
fn an_event_loop_reads_its_own_reply_as_it_comes_without_waiting() {
    // The reply comes in two writes. No runtime thread runs after the connect: only this
    // thread's `read_ready` calls read it, each returning at once.
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (wrote, wrote_rx) = std::sync::mpsc::channel();
    let (go, go_rx) = std::sync::mpsc::channel::<()>();
    let server = std::thread::spawn(move || {
        let (mut socket, _) = listener.accept().unwrap();
        let mut seen = Vec::new();
        let mut buf = [0u8; 64];
        while !seen.ends_with(b"PING\r\n") {
            let n = socket.read(&mut buf).unwrap();
            seen.extend_from_slice(&buf[..n]);
        }
        socket.write_all(b"+PO").unwrap();
        wrote.send(()).unwrap();
        go_rx.recv().unwrap();
        socket.write_all(b"NG\r\n").unwrap();
        let _ = socket.read(&mut buf);
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let conn = rt.block_on(Connection::connect(addr, &resp2())).unwrap();
    let me = std::thread::current().id();
    let (tx, rx) = std::sync::mpsc::channel();
    let reply = move |result: Result<Value>| {
        let _ = tx.send((std::thread::current().id(), result));
    };
    let mut own = call_own(
        &conn,
        &["PING"],
        Instant::now() + Duration::from_secs(60),
        reply,
    );
    let readable = |fd| {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call.
        assert_eq!(unsafe { libc::poll(&mut p, 1, 10_000) }, 1, "nothing came");
    };
    wrote_rx.recv().unwrap();
    readable(own.fd());
    assert!(
        own.read_ready().is_pending(),
        "half a reply was taken for a whole one"
    );
    assert!(rx.try_recv().is_err());
    go.send(()).unwrap();
    let delivered = loop {
        match own.read_ready() {
            std::task::Poll::Ready(delivered) => break delivered,
            std::task::Poll::Pending => readable(own.fd()),
        }
    };
    assert!(delivered);
    let (thread, result) = rx
        .try_recv()
        .expect("read_ready returned before the reply ran");
    assert_eq!(thread, me);
    assert_eq!(result.unwrap(), Value::Simple("PONG".into()));
    // Spent: the read side is back with the task.
    assert_eq!(own.read_ready(), std::task::Poll::Ready(false));
    assert!(conn.shared.read.locked().side.is_some());
    drop(own);
    drop(conn);
    drop(rt);
    server.join().unwrap();
}

#[test]
fn an_own_read_without_leave_to_spin_sleeps() {
    // A waiter denied the spin (others spin already, or replies are slow) must sleep in the
    // kernel, not ask the socket in a loop until its deadline: over a 300 ms wait for a reply
    // that never comes, it may use a little CPU, not the whole wait.
    let cpu_now = || {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid timespec for the call to fill.
        assert_eq!(
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) },
            0
        );
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let conn = rt.block_on(Connection::connect(addr, &resp2())).unwrap();
    let (_socket, _) = listener.accept().unwrap();
    let own = call_own(
        &conn,
        &["PING"],
        Instant::now() + Duration::from_secs(60),
        |_: Result<Value>| {},
    );
    let (wall, cpu) = (std::time::Instant::now(), cpu_now());
    assert!(!own.read(wall + Duration::from_millis(300), None));
    let (wall, cpu) = (wall.elapsed(), cpu_now() - cpu);
    assert!(
        wall >= Duration::from_millis(290),
        "returned after {wall:?}"
    );
    assert!(
        cpu < wall / 4,
        "used {cpu:?} of CPU over a {wall:?} wait: it did not sleep"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_after_the_own_one_are_handed_back_to_the_task() {
    // "A" gets no reply of its own: the reply to "B" carries both, in one write, so the thread
    // reading A's reply finds B's behind it.
    let server = MockServer::start(|cmd| match cmd[0].as_slice() {
        b"A" => Action::Silent,
        _ => Action::reply("+a\r\n+b\r\n"),
    })
    .await;
    let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
    let waiting = conn.clone();
    let (b_reply, b_rx) = replies();
    let own_thread = std::thread::spawn(move || {
        let (a_reply, a_rx) = replies();
        let deadline = Instant::now() + Duration::from_secs(60);
        let own = call_own(&waiting, &["A"], deadline, a_reply);
        // B is queued behind A before A's reply is read (the task writes it: a reply is due).
        assert!(waiting
            .call(encoded(&["B"]), deadline, b_reply, Reading::Offer)
            .is_ok_and(|own| own.is_none()));
        let read_here = own.read(std::time::Instant::now() + Duration::from_secs(10), None);
        (read_here, a_rx.recv().unwrap())
    });
    let (_, a) = tokio::task::spawn_blocking(move || own_thread.join().unwrap())
        .await
        .unwrap();
    assert_eq!(a.unwrap(), Value::Simple("a".into()));
    let b = tokio::task::spawn_blocking(move || b_rx.recv_timeout(Duration::from_secs(10)))
        .await
        .unwrap()
        .expect("the reply behind the own one was not handed back");
    assert_eq!(b.unwrap(), Value::Simple("b".into()));
    // The connection goes on: the read side is back with the task.
    let v = conn.request(&["B"]).await.unwrap();
    assert_eq!(v, Value::Simple("a".into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_own_read_ends_with_the_deadline_the_connection_or_a_bad_reply() {
    // The deadline: the task times the call out; the reader stops waiting. (A mock server
    // serves one connection: each part has its own.)
    let server = MockServer::start(|_| Action::Silent).await;
    let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
    let read_own = |conn: &Connection, command: &'static str, deadline: Instant| {
        let conn = conn.clone();
        std::thread::spawn(move || {
            let (reply, rx) = replies();
            let own = call_own(&conn, &[command], deadline, reply);
            let read_here = own.read(std::time::Instant::now() + Duration::from_secs(600), None);
            (read_here, rx.recv_timeout(Duration::from_secs(10)))
        })
    };
    // Each reader must be done long before its 600-second wait would end by itself.
    let join = |t: std::thread::JoinHandle<_>| async move {
        let joined = tokio::task::spawn_blocking(move || t.join().unwrap());
        tokio::time::timeout(Duration::from_secs(30), joined)
            .await
            .expect("the reader still waits on the socket")
    };

    let t = read_own(&conn, "SLOW", Instant::now() + Duration::from_millis(100));
    let (read_here, result) = join(t).await.unwrap();
    assert!(!read_here);
    assert_eq!(result.unwrap().unwrap_err().code(), ErrorCode::Timeout);
    assert!(!conn.is_closed());

    // Closing the connection wakes a reader waiting long before its deadline (a connection of
    // its own: the first one still waits for the reply that timed out).
    let server = MockServer::start(|_| Action::Silent).await;
    let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
    let far = Instant::now() + Duration::from_secs(600);
    let t = read_own(&conn, "SLOW", far);
    while conn.shared.outbox.locked().waiters.is_empty() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    conn.close();
    let (read_here, result) = join(t).await.unwrap();
    assert!(!read_here);
    let e = result
        .expect("closing did not wake the reader")
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::ConnectionLost, "{e}");

    // An invalid reply read by the caller ends the connection as the task's own read would.
    let server = MockServer::start(|_| Action::reply("?what\r\n")).await;
    let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
    let t = read_own(&conn, "BAD", far);
    let (read_here, result) = join(t).await.unwrap();
    assert!(!read_here);
    assert_eq!(result.unwrap().unwrap_err().code(), ErrorCode::Protocol);
    conn.closed().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_reads_mixed_with_the_task_lose_no_reply_and_no_wake_up() {
    // Threads that read their own replies whenever the connection was idle, beside tasks whose
    // replies only the connection's task reads: a reply the task is not woken for would stall
    // its caller until the deadline (a timeout here), a reply read by the wrong side would go to
    // the wrong caller.
    let server = MockServer::start(|cmd| {
        Action::Reply(bulk(&String::from_utf8_lossy(&cmd[1])).into_bytes())
    })
    .await;
    let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
    let own_reads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let threads: Vec<_> = (0..2)
        .map(|t| {
            let conn = conn.clone();
            let own_reads = own_reads.clone();
            std::thread::spawn(move || {
                for i in 0..500 {
                    let payload = format!("t{t}-{i}");
                    let (reply, rx) = replies();
                    let deadline = Instant::now() + Duration::from_secs(10);
                    let args = ["ECHO", payload.as_str()];
                    let own = conn
                        .call(encoded(&args), deadline, reply, Reading::Offer)
                        .ok()
                        .unwrap();
                    if let Some(own) = own {
                        let until = std::time::Instant::now() + Duration::from_secs(10);
                        if own.read(until, None) {
                            own_reads.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    let value = rx.recv().unwrap().unwrap();
                    assert_eq!(value.as_str(), Some(payload.as_str()));
                }
            })
        })
        .collect();
    let tasks: Vec<_> = (0..2)
        .map(|t| {
            let conn = conn.clone();
            tokio::spawn(async move {
                for i in 0..500 {
                    let payload = format!("task{t}-{i}");
                    let args = ["ECHO", payload.as_str()];
                    let request = conn.request(&args);
                    let Ok(value) = tokio::time::timeout(Duration::from_secs(10), request).await
                    else {
                        let out = conn.shared.outbox.locked();
                        let (waiting, answered) = (out.waiters.len(), out.answered);
                        drop(out);
                        let read = conn.shared.read.locked();
                        panic!(
                            "no reply to {payload}: {waiting} waiting, {answered} answered; \
                             read side lent: {}, task deferred: {}",
                            read.side.is_none(),
                            read.deferred
                        );
                    };
                    assert_eq!(value.unwrap().as_str(), Some(payload.as_str()));
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    tokio::task::spawn_blocking(move || {
        for t in threads {
            t.join().unwrap();
        }
    })
    .await
    .unwrap();
    assert!(
        own_reads.load(Ordering::Relaxed) > 0,
        "no reply was read by its caller"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_found_the_read_side_lent_is_woken_by_later_replies() {
    use std::io::{Read, Write};
    // A scripted server: it answers A's command in two pieces, the first when B arrives and the
    // second when C arrives, and B's and C's replies only when the test says so, after the
    // thread reading A's reply handed the read side back. Nothing else wakes the task then (no
    // bytes to write, no deadline): only the readiness it registered for when it found the
    // side lent.
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let (addr, server) = scripted_server(move |mut socket, mut seen| {
        seen.wait_for(&mut socket, b"$1\r\nB\r\n");
        socket.write_all(b"+").unwrap();
        seen.wait_for(&mut socket, b"$1\r\nC\r\n");
        socket.write_all(b"a\r\n").unwrap();
        go_rx.recv().unwrap();
        socket.write_all(b"+b\r\n+c\r\n").unwrap();
        let _ = socket.read(&mut [0u8; 256]);
    });
    let conn = Connection::connect(addr, &resp2()).await.unwrap();
    let reader = conn.clone();
    let (called_tx, called_rx) = std::sync::mpsc::channel();
    let x = std::thread::spawn(move || {
        let (reply, rx) = replies();
        let deadline = Instant::now() + Duration::from_secs(60);
        let own = call_own(&reader, &["A"], deadline, reply);
        called_tx.send(()).unwrap();
        let read_here = own.read(std::time::Instant::now() + Duration::from_secs(60), None);
        (read_here, rx.recv().unwrap())
    });
    let wait_until = |what: &'static str, check: Box<dyn Fn(&ReadState) -> bool + Send>| {
        let conn = conn.clone();
        async move {
            let waited = tokio::time::timeout(Duration::from_secs(10), async {
                while !check(&conn.shared.read.locked()) {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            });
            waited.await.unwrap_or_else(|_| panic!("never {what}"));
        }
    };
    // (Not looked at before the call: the read side is lent only if its lock is free.)
    tokio::task::spawn_blocking(move || called_rx.recv().unwrap())
        .await
        .unwrap();
    wait_until("lent", Box::new(|s| s.side.is_none())).await;
    let b = tokio::spawn({
        let conn = conn.clone();
        async move { conn.request(&["B"]).await }
    });
    // Writing B (or the first piece of A's reply) wakes the task, which finds the side lent.
    wait_until("deferred", Box::new(|s| s.deferred)).await;
    while conn.shared.outbox.locked().waiters.len() < 2 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let c = tokio::spawn({
        let conn = conn.clone();
        async move { conn.request(&["C"]).await }
    });
    let (read_here, a) = tokio::task::spawn_blocking(move || x.join().unwrap())
        .await
        .unwrap();
    assert!(read_here);
    assert_eq!(a.unwrap(), Value::Simple("a".into()));
    go_tx.send(()).unwrap();
    for (name, request) in [("b", b), ("c", c)] {
        let got = tokio::time::timeout(Duration::from_secs(10), request)
            .await
            .unwrap_or_else(|_| panic!("the task was not woken for the reply to {name}"))
            .unwrap()
            .unwrap();
        assert_eq!(got, Value::Simple(name.into()));
    }
    drop(conn);
    server.join().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_left_unread_by_the_caller_that_held_the_read_side_wakes_the_task() {
    // While a caller holds the read side, the runtime is not woken for the socket's bytes (a
    // reply that caller reads must not wake a core thread too). A reply that came meanwhile and
    // that the caller left unread must wake the task once the side is back: nothing else would
    // here (nothing to write, a deadline a minute away). The first PING, read by the task,
    // leaves the socket recorded as ready once in the runtime's view; handing the side back
    // must report the waiting bytes all the same.
    let (addr, server) = pong_server();
    let conn = Connection::connect(addr, &resp2()).await.unwrap();
    let pong = Value::Simple("PONG".into());
    assert_eq!(conn.request(&["PING"]).await.unwrap(), pong);
    let caller = conn.clone();
    let rx = tokio::task::spawn_blocking(move || {
        let (reply, rx) = replies();
        let own = call_own(
            &caller,
            &["PING"],
            Instant::now() + Duration::from_secs(60),
            reply,
        );
        let mut fd = libc::pollfd {
            fd: own.fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, for the duration of the call.
        assert_eq!(
            unsafe { libc::poll(&mut fd, 1, 10_000) },
            1,
            "no reply came"
        );
        drop(own);
        rx
    })
    .await
    .unwrap();
    let got = tokio::task::spawn_blocking(move || rx.recv_timeout(Duration::from_secs(10)))
        .await
        .unwrap()
        .expect("the task was not woken for the reply the caller left");
    assert_eq!(got.unwrap(), pong);
    drop(conn);
    server.join().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_caller_read_its_own_reply_the_task_sees_the_server_end_the_idle_connection() {
    use std::io::Write;
    // The caller's read took the socket out of what the runtime watches; handing the read side
    // back must put it in again, or a server that closes an idle connection (a timeout, CLIENT
    // KILL, a demoted primary) would go unnoticed until the next command.
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let (addr, server) = scripted_server(move |mut socket, mut seen| {
        seen.wait_for(&mut socket, b"PING\r\n");
        socket.write_all(b"+PONG\r\n").unwrap();
        go_rx.recv().unwrap();
    });
    let conn = Connection::connect(addr, &resp2()).await.unwrap();
    let caller = conn.clone();
    let (read_here, result) = tokio::task::spawn_blocking(move || {
        let (reply, rx) = replies();
        let own = call_own(
            &caller,
            &["PING"],
            Instant::now() + Duration::from_secs(60),
            reply,
        );
        let read_here = own.read(std::time::Instant::now() + Duration::from_secs(10), None);
        (read_here, rx.recv().unwrap())
    })
    .await
    .unwrap();
    assert!(read_here, "the caller did not read its own reply");
    assert_eq!(result.unwrap(), Value::Simple("PONG".into()));
    assert!(!conn.is_closed());
    go_tx.send(()).unwrap();
    server.join().unwrap();
    tokio::time::timeout(Duration::from_secs(10), conn.closed())
        .await
        .expect("the task did not notice the server closing the idle connection");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_own_reply_given_back_leaves_the_reply_to_the_task_and_keeps_its_socket_open() {
    use std::io::Write;
    // An event loop that goes on watching the descriptor after giving the read back must be
    // sure the number is not reused meanwhile: the socket stays open as long as the `OwnReply`,
    // also after the connection ended (the task shuts it down, so the peer sees the end).
    let (reply_tx, reply_rx) = std::sync::mpsc::channel::<()>();
    let (addr, server) = scripted_server(move |mut socket, mut seen| {
        seen.wait_for(&mut socket, b"PING\r\n");
        reply_rx.recv().unwrap();
        socket.write_all(b"+PONG\r\n").unwrap();
    });
    let conn = Connection::connect(addr, &resp2()).await.unwrap();
    let caller = conn.clone();
    let (own, rx) = tokio::task::spawn_blocking(move || {
        let (reply, rx) = replies();
        let mut own = call_own(
            &caller,
            &["PING"],
            Instant::now() + Duration::from_secs(60),
            reply,
        );
        own.give_back();
        own.give_back();
        (own, rx)
    })
    .await
    .unwrap();
    reply_tx.send(()).unwrap();
    let result = tokio::task::spawn_blocking(move || rx.recv_timeout(Duration::from_secs(10)))
        .await
        .unwrap()
        .expect("the task did not read the reply given back");
    assert_eq!(result.unwrap(), Value::Simple("PONG".into()));
    server.join().unwrap();
    tokio::time::timeout(Duration::from_secs(10), conn.closed())
        .await
        .expect("the task did not notice the server closing the connection");
    let mut own = own;
    assert_eq!(own.read_ready(), std::task::Poll::Ready(false));
    // SAFETY: a query of the descriptor's flags.
    assert_ne!(
        unsafe { libc::fcntl(own.fd(), libc::F_GETFD) },
        -1,
        "closed under the OwnReply"
    );
    let mut byte = 0u8;
    // SAFETY: reads at most one byte into `byte`.
    let n = unsafe {
        libc::recv(
            own.fd(),
            (&mut byte as *mut u8).cast(),
            1,
            libc::MSG_DONTWAIT,
        )
    };
    assert_eq!(
        n, 0,
        "the socket is at its end (shut down, or closed by the peer)"
    );
}

/// Waits until `fd` is readable (bytes or the end of the stream), as an event loop would.
fn wait_readable_fd(fd: std::os::fd::RawFd) {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    assert_eq!(
        unsafe { libc::poll(&mut pfd, 1, 10_000) },
        1,
        "not readable in 10 s"
    );
}

/// Reads `own`'s reply as an event loop does: each time the socket is readable.
fn read_as_a_loop(own: &mut OwnReply) -> bool {
    loop {
        match own.read_ready() {
            std::task::Poll::Ready(read) => return read,
            std::task::Poll::Pending => wait_readable_fd(own.fd()),
        }
    }
}

/// Sends PING on idle `conn` and reads the reply as a loop that keeps watching the socket;
/// `previous`, the loop's last `OwnReply`, goes after this one's lend, as a loop replaces it.
fn ping_read_by_a_loop(conn: &Connection, previous: Option<OwnReply>) -> OwnReply {
    let (reply, rx) = replies();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut own = call_own(conn, &["PING"], deadline, reply);
    own.keep_watching();
    drop(previous);
    assert!(read_as_a_loop(&mut own), "not read by the loop");
    assert_eq!(
        rx.try_recv().unwrap().unwrap(),
        Value::Simple("PONG".into())
    );
    own
}

/// A server that answers every PING until `close` is told to end the connection.
fn ping_server_until(
    close: std::sync::mpsc::Receiver<()>,
) -> (SocketAddr, std::thread::JoinHandle<()>) {
    use std::io::{Read, Write};
    scripted_server(move |mut socket, _| {
        let mut seen = Vec::new();
        let mut buf = [0u8; 256];
        socket
            .set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        while close.try_recv().is_err() {
            let n = match socket.read(&mut buf) {
                Ok(n) => n,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    continue
                }
                Err(e) => panic!("{e}"),
            };
            assert!(n > 0, "client went away");
            seen.extend_from_slice(&buf[..n]);
            while let Some(at) = seen.windows(6).position(|w| w == b"PING\r\n") {
                seen.drain(..at + 6);
                socket.write_all(b"+PONG\r\n").unwrap();
            }
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_that_keeps_watching_reads_reply_after_reply_and_lets_go_to_the_task() {
    // A loop that keeps watching the socket after its reply (`keep_watching`) leaves it out of
    // the runtime's watch in between. Its next command takes the read side again; a command the
    // task sends meanwhile makes the task take the socket back; and when the loop lets go
    // (`give_back`, or a drop) after the server ended the connection, the task sees the end.
    let (close_tx, close_rx) = std::sync::mpsc::channel::<()>();
    let (addr, server) = ping_server_until(close_rx);
    let conn = Connection::connect(addr, &resp2()).await.unwrap();
    let deadline = || Instant::now() + Duration::from_secs(60);
    let caller = conn.clone();
    let kept = tokio::task::spawn_blocking(move || {
        let mut kept = None;
        for _ in 0..3 {
            kept = Some(ping_read_by_a_loop(&caller, kept));
        }
        kept
    })
    .await
    .unwrap();
    // Watched elsewhere now: a command the task sends and reads itself still gets its reply.
    let (reply, rx) = replies();
    assert!(conn
        .call(encoded(&["PING"]), deadline(), reply, Reading::Task)
        .is_ok());
    let got = tokio::task::spawn_blocking(move || rx.recv_timeout(Duration::from_secs(10)))
        .await
        .unwrap()
        .expect("the task did not read the reply to its own command");
    assert_eq!(got.unwrap(), Value::Simple("PONG".into()));
    drop(kept);
    close_tx.send(()).unwrap();
    server.join().unwrap();
    // And the end of a connection the loop keeps: the runtime must not see it (the socket is
    // out of its watch) until the loop lets go. The task takes the socket back whenever it runs
    // for something else (a wake still pending from the command's deadline, a readiness the
    // runtime reported while the loop read), which is right but not what this checks: such a
    // round is tried again on a fresh connection.
    for _ in 0..20 {
        if the_end_waits_for_the_loop().await {
            return;
        }
    }
    panic!("in 20 rounds the task took back a socket the loop kept, and saw the end the loop had to see first");
}

/// One connection whose socket a loop keeps after its reply while the server ends the
/// connection: false when the task took the socket back before the end was seen (nothing to
/// judge), else the checks that the end waited for the loop and reached the task once it let go.
async fn the_end_waits_for_the_loop() -> bool {
    let (close_tx, close_rx) = std::sync::mpsc::channel::<()>();
    let (addr, server) = ping_server_until(close_rx);
    let conn = Connection::connect(addr, &resp2()).await.unwrap();
    let kept = || conn.shared.read.locked().watched_elsewhere;
    // The socket stays with the loop only when nothing else was pending at its reply (a
    // readiness reported while the loop read hands it back to the task): read until it does.
    let mut own = None;
    for _ in 0..50 {
        let caller = conn.clone();
        let read = tokio::task::spawn_blocking(move || ping_read_by_a_loop(&caller, None))
            .await
            .unwrap();
        if kept() {
            own = Some(read);
            break;
        }
    }
    let Some(mut own) = own else {
        close_tx.send(()).unwrap();
        server.join().unwrap();
        return false;
    };
    close_tx.send(()).unwrap();
    server.join().unwrap();
    let fd = own.fd();
    tokio::task::spawn_blocking(move || wait_readable_fd(fd))
        .await
        .unwrap();
    // The end is there. Had the runtime watched the socket, its readiness would make the task
    // run, take the socket back and end the connection: every round would come out false, and
    // the test fails. Proving that the task does not run needs a window: 100 ms for it to show.
    let window = Instant::now() + Duration::from_millis(100);
    while Instant::now() < window {
        if !kept() {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    own.give_back();
    tokio::time::timeout(Duration::from_secs(10), conn.closed())
        .await
        .expect("the task did not see the end once the loop let go");
    true
}

/// A plain-thread server that answers each `ECHO x` it reads with the bulk string `x`, until the
/// client goes.
fn echo_server() -> (SocketAddr, std::thread::JoinHandle<()>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut socket, _) = listener.accept().unwrap();
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match socket.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
            // Whole commands `*2 $4 ECHO $len arg`: the argument is the fifth line.
            loop {
                let text = String::from_utf8_lossy(&seen).into_owned();
                let lines: Vec<&str> = text.split("\r\n").collect();
                if lines.len() < 6 {
                    break;
                }
                let arg = lines[4];
                let used: usize = lines[..5].iter().map(|l| l.len() + 2).sum();
                seen.drain(..used);
                if socket.write_all(bulk(arg).as_bytes()).is_err() {
                    return;
                }
            }
        }
    });
    (addr, server)
}

#[test]
fn commands_that_join_an_own_reply_are_read_and_written_by_its_holder() {
    // The connection's task runs on a current-thread runtime that is driven only to connect
    // and at the end: while this thread holds the reply, nothing else can touch the outbox, so
    // what is left unwritten after each command is this thread's doing alone.
    let (addr, server) = echo_server();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let conn = rt.block_on(Connection::connect(addr, &resp2())).unwrap();
    let here = std::thread::current().id();
    let (tx, rx) = std::sync::mpsc::channel();
    let reply = |n: usize| {
        let tx = tx.clone();
        move |result: Result<Value>| {
            let _ = tx.send((n, result, std::thread::current().id()));
        }
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut own = call_own(&conn, &["ECHO", "0"], deadline, reply(0));
    let numbers: Vec<String> = (1..=30).map(|n| n.to_string()).collect();
    // Unwritten bytes after each command: the first ten are written at once, the next twenty
    // deferred (sixteen go out together, the last four wait for `flush`).
    let mut unwritten = Vec::new();
    for (i, n) in numbers.iter().enumerate() {
        own.defer_writes(i >= 10);
        let joined = conn.call(
            encoded(&["ECHO", n.as_str()]),
            deadline,
            reply(i + 1),
            Reading::Extend(&mut own),
        );
        assert!(joined.is_ok_and(|offered| offered.is_none()));
        unwritten.push(conn.shared.outbox.locked().bytes.len());
    }
    own.flush();
    let after_flush = conn.shared.outbox.locked().bytes.len();
    // Every reply, the first and the thirty that joined it, is read on this thread.
    let read_here = own.read(std::time::Instant::now() + Duration::from_secs(10), None);
    drop(tx);
    // A reply handed back to the task never comes (its runtime is not driven): bounded wait.
    let got: Vec<_> = std::iter::from_fn(|| rx.recv_timeout(Duration::from_secs(5)).ok())
        .take(31)
        .collect();
    let commands = |n: usize| n * "*2\r\n$4\r\nECHO\r\n$2\r\n10\r\n".len();
    let mut expected = vec![0; 10];
    expected.extend((1..16).map(commands));
    expected.push(0);
    expected.extend((1..=4).map(commands));
    assert_eq!(unwritten, expected);
    assert_eq!(after_flush, 0, "flush left deferred commands in the outbox");
    assert!(
        read_here,
        "the last reply was not handed over by its holder"
    );
    assert_eq!(got.len(), 31);
    for (i, (n, result, thread)) in got.iter().enumerate() {
        assert_eq!(*n, i, "replies completed out of order");
        assert_eq!(text(result.as_ref().unwrap()), i.to_string());
        assert_eq!(*thread, here, "reply {i} was read on another thread");
    }
    // The read side is back with the task: the connection goes on.
    let next = rt.block_on(conn.request(&["ECHO", "next"])).unwrap();
    assert_eq!(text(&next), "next");
    drop(conn);
    drop(rt);
    server.join().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferred_writes_go_out_when_their_holder_is_dropped_without_a_flush() {
    let server = MockServer::start(|cmd| {
        Action::Reply(bulk(&String::from_utf8_lossy(&cmd[1])).into_bytes())
    })
    .await;
    let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
    let holder = conn.clone();
    let rx = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        let (first, _first_rx) = replies();
        let mut own = call_own(&holder, &["ECHO", "a"], deadline, first);
        own.defer_writes(true);
        let (joined, rx) = replies();
        assert!(holder
            .call(
                encoded(&["ECHO", "b"]),
                deadline,
                joined,
                Reading::Extend(&mut own)
            )
            .is_ok());
        // Dropped unread and unflushed: the task writes the command and reads both replies.
        drop(own);
        rx
    })
    .join()
    .unwrap();
    let b = tokio::task::spawn_blocking(move || rx.recv_timeout(Duration::from_secs(10)))
        .await
        .unwrap()
        .expect("a deferred command was never sent");
    assert_eq!(text(&b.unwrap()), "b");
}

/// Group commit: commands sent while a trailer is outstanding are not answered by it; they go
/// out together once it is answered, followed by one trailer of their own, and every command
/// gets its own reply with the trailer written after it, in order.
#[tokio::test]
async fn commands_sent_while_a_trailer_is_outstanding_share_the_next_trailer() {
    let (release, held) = tokio::sync::oneshot::channel();
    let mut held = Some(held);
    let mut waits = 0;
    let server = MockServer::start(move |cmd| {
        if cmd[0] == b"WAIT" {
            waits += 1;
            if waits == 1 {
                return Action::Held(held.take().unwrap());
            }
            return Action::reply(":2\r\n");
        }
        Action::Reply(bulk(&String::from_utf8_lossy(&cmd[1])).into_bytes())
    })
    .await;
    let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
    let encode = |args: &[&str]| {
        let mut out = BytesMut::new();
        crate::resp::encode_command(args, &mut out);
        out.freeze()
    };
    let trailer = encode(&["WAIT", "1", "100"]);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let send = |name: &'static str| {
        let tx = tx.clone();
        conn.call_in_group(encode(&["ECHO", name]), trailer.clone(), move |reply| {
            tx.send((name, reply)).unwrap()
        });
    };
    send("a");
    // The first trailer is held by the server: these wait for the next one.
    tokio::time::sleep(Duration::from_millis(50)).await;
    send("b");
    send("c");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        rx.try_recv().is_err(),
        "nothing is answered before its trailer"
    );
    release.send(b":1\r\n".to_vec()).unwrap();
    let mut got = Vec::new();
    for _ in 0..3 {
        let (name, reply) = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap()
            .unwrap();
        let GroupReply::Replied { reply, trailer } = reply else {
            panic!("{name} was not sent");
        };
        got.push((name, text(&reply.unwrap()).to_string(), trailer.unwrap()));
    }
    assert_eq!(
        got,
        vec![
            ("a", "a".to_string(), Value::Int(1)),
            ("b", "b".to_string(), Value::Int(2)),
            ("c", "c".to_string(), Value::Int(2)),
        ],
        "a's trailer answered a alone; b and c shared the next"
    );
    drop(conn);
    let names: Vec<String> = server
        .commands()
        .await
        .iter()
        .map(|c| String::from_utf8_lossy(&c[0]).into_owned())
        .collect();
    assert_eq!(names, ["ECHO", "WAIT", "ECHO", "ECHO", "WAIT"]);
}

/// A command sent in a group on a connection that has ended is not sent, and says so.
#[tokio::test]
async fn a_command_in_a_group_on_an_ended_connection_is_not_sent() {
    let server = MockServer::start(|_| Action::reply("+OK\r\n")).await;
    let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
    conn.close();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let mut out = BytesMut::new();
    crate::resp::encode_command(&["SET", "k", "v"], &mut out);
    conn.call_in_group(
        out.freeze(),
        bytes::Bytes::from_static(b"*1\r\n$4\r\nPING\r\n"),
        move |r| tx.send(r).unwrap(),
    );
    assert!(matches!(rx.await.unwrap(), GroupReply::NotSent));
}
