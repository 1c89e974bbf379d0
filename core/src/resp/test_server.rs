//! A scripted one-connection RESP server for unit tests.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::BytesMut;
use redis_protocol::resp2::decode::decode_bytes_mut;
use redis_protocol::resp2::types::BytesFrame;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// What the server does with one received command.
pub(crate) enum Action {
    /// Writes these bytes.
    Reply(Vec<u8>),
    /// Writes nothing.
    Silent,
    /// Writes these bytes, then closes the connection.
    Close(Vec<u8>),
    /// Writes what came before, then these bytes once they are sent (a reply held back).
    Held(tokio::sync::oneshot::Receiver<Vec<u8>>),
}

impl Action {
    pub(crate) fn reply(wire: &str) -> Action {
        Action::Reply(wire.as_bytes().to_vec())
    }
}

/// What the server saw.
#[derive(Debug, Default)]
pub(crate) struct Log {
    pub(crate) commands: Vec<Vec<Vec<u8>>>,
    /// Most commands that arrived in a single read: evidence of write batching.
    pub(crate) max_per_read: usize,
}

pub(crate) struct MockServer {
    pub(crate) addr: SocketAddr,
    handle: JoinHandle<Log>,
}

impl MockServer {
    /// Listens on 127.0.0.1:0 and serves the first connection with `handler`.
    pub(crate) async fn start<F>(handler: F) -> MockServer
    where
        F: FnMut(&[Vec<u8>]) -> Action + Send + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let handle = tokio::spawn(serve(listener, handler));
        MockServer { addr, handle }
    }

    /// Waits (at most 5 s) for the client to go away and returns the log.
    pub(crate) async fn finish(self) -> Log {
        tokio::time::timeout(Duration::from_secs(5), self.handle)
            .await
            .expect("mock server did not finish")
            .unwrap()
    }

    /// The commands received, once the client has gone away.
    pub(crate) async fn commands(self) -> Vec<Vec<Vec<u8>>> {
        self.finish().await.commands
    }
}

async fn serve<F>(listener: TcpListener, mut handler: F) -> Log
where
    F: FnMut(&[Vec<u8>]) -> Action,
{
    let mut log = Log::default();
    let (mut sock, _) = listener.accept().await.unwrap();
    let mut buf = BytesMut::new();
    // Commands that arrived behind a held reply are served before reading more.
    let mut read_more = true;
    loop {
        if read_more {
            match sock.read_buf(&mut buf).await {
                Ok(0) | Err(_) => return log,
                Ok(_) => {}
            }
        }
        read_more = true;
        let mut out = Vec::new();
        let mut in_this_read = 0;
        let mut close = false;
        let mut held = None;
        while let Some((frame, _, _)) = decode_bytes_mut(&mut buf).unwrap() {
            let BytesFrame::Array(parts) = frame else {
                panic!("client sent a non-array frame")
            };
            let cmd: Vec<Vec<u8>> = parts
                .into_iter()
                .map(|p| match p {
                    BytesFrame::BulkString(b) => b.to_vec(),
                    other => panic!("client sent {other:?}"),
                })
                .collect();
            in_this_read += 1;
            match handler(&cmd) {
                Action::Reply(bytes) => out.extend_from_slice(&bytes),
                Action::Silent => {}
                Action::Close(bytes) => {
                    out.extend_from_slice(&bytes);
                    close = true;
                }
                Action::Held(rx) => held = Some(rx),
            }
            log.commands.push(cmd);
            if close || held.is_some() {
                break;
            }
        }
        log.max_per_read = log.max_per_read.max(in_this_read);
        if !out.is_empty() && sock.write_all(&out).await.is_err() {
            return log;
        }
        if let Some(rx) = held {
            let Ok(bytes) = rx.await else { return log };
            if sock.write_all(&bytes).await.is_err() {
                return log;
            }
            read_more = buf.is_empty();
        }
        if close {
            let _ = sock.shutdown().await;
            return log;
        }
    }
}

/// Encodes a bulk string, for building replies.
pub(crate) fn bulk(s: &str) -> String {
    format!("${}\r\n{s}\r\n", s.len())
}
