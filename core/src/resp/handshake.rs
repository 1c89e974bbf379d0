//! Connection setup: protocol negotiation, authentication, client name, database.
//!
//! `HELLO 3 [AUTH user pass] [SETNAME name]` does all of it in one round trip on Redis 6+ and
//! sentinels 6+. Older servers (and RESP2-only proxies) refuse HELLO with an ordinary error, and get
//! the RESP2 sequence `AUTH`, `CLIENT SETNAME` instead. Credentials refused by HELLO are final: the
//! same password would be refused by AUTH too.
//!
//! Server error texts can echo arguments ("unknown command 'HELLO', with args beginning with:
//! ..."), which would include the password; errors from commands that carried it are scrubbed
//! before they go anywhere, and no command argument is ever logged.

use crate::config::Protocol;
use crate::error::{Error, ErrorCode, Result};
use crate::resp::{ConnectOptions, Connection};

/// Runs the handshake `opts` asks for on a fresh connection; on success `conn.protocol()` is the
/// negotiated protocol.
pub(crate) async fn run(conn: &Connection, opts: &ConnectOptions) -> Result<()> {
    let password = opts.auth.as_ref().map(|c| c.password.expose());
    let mut need_resp2_setup = true;

    if opts.protocol == Protocol::Resp3 {
        let mut args: Vec<&[u8]> = vec![b"HELLO", b"3"];
        if let Some(creds) = &opts.auth {
            args.push(b"AUTH");
            args.push(creds.username.as_deref().unwrap_or("default").as_bytes());
            args.push(creds.password.expose().as_bytes());
        }
        if let Some(name) = &opts.client_name {
            args.push(b"SETNAME");
            args.push(name.as_bytes());
        }
        // A successful HELLO 3 reply is already RESP3; an error reads the same in both.
        conn.set_protocol(Protocol::Resp3);
        match conn.request(&args).await {
            Ok(_) => need_resp2_setup = false,
            Err(e) => {
                conn.set_protocol(Protocol::Resp2);
                let e = scrub(e, password);
                match e.code() {
                    ErrorCode::Server => tracing::debug!(
                        peer = %conn.peer(),
                        server_code = e.server_code().unwrap_or(""),
                        "HELLO 3 refused, falling back to RESP2"
                    ),
                    _ => return Err(e.context("HELLO")),
                }
            }
        }
    }

    if need_resp2_setup {
        if let Some(creds) = &opts.auth {
            let pass = creds.password.expose().as_bytes();
            let reply = match &creds.username {
                Some(user) => {
                    conn.request(&[b"AUTH".as_slice(), user.as_bytes(), pass])
                        .await
                }
                None => conn.request(&[b"AUTH".as_slice(), pass]).await,
            };
            reply.map_err(|e| scrub(e, password).context("AUTH"))?;
        }
        if let Some(name) = &opts.client_name {
            conn.request(&[b"CLIENT".as_slice(), b"SETNAME", name.as_bytes()])
                .await
                .map_err(|e| scrub(e, password).context("CLIENT SETNAME"))?;
        }
    }

    if opts.db != 0 {
        let db = opts.db.to_string();
        conn.request(&["SELECT", db.as_str()])
            .await
            .map_err(|e| scrub(e, password).context("SELECT"))?;
    }
    Ok(())
}

/// Removes anything of `secret` a server may have echoed into an error.
///
/// Redis truncates echoed arguments, so a prefix of the secret could appear: everything from the
/// echo marker on is cut, and any remaining whole occurrence is masked.
fn scrub(err: Error, secret: Option<&str>) -> Error {
    let Some(secret) = secret.filter(|s| !s.is_empty()) else {
        return err;
    };
    let mut text = err.message().to_owned();
    let mut changed = false;
    if let Some(at) = text.find("with args beginning with") {
        text.truncate(at);
        let kept = text.trim_end().trim_end_matches(',').len();
        text.truncate(kept);
        changed = true;
    }
    if text.contains(secret) {
        text = text.replace(secret, "***");
        changed = true;
    }
    if !changed {
        return err;
    }
    if err.server_code().is_some() {
        Error::server(&text)
    } else {
        Error::new(err.code(), text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Credentials, Secret};
    use crate::resp::test_server::{Action, MockServer};
    use std::time::Duration;

    fn creds(user: Option<&str>, pass: &str) -> Credentials {
        Credentials {
            username: user.map(str::to_owned),
            password: Secret::new(pass),
        }
    }

    fn opts(protocol: Protocol) -> ConnectOptions {
        ConnectOptions {
            connect_timeout: Duration::from_secs(5),
            protocol,
            ..ConnectOptions::default()
        }
    }

    #[test]
    fn scrub_removes_echoed_secrets() {
        let e = Error::server(
            "ERR unknown command 'HELLO', with args beginning with: '3' 'AUTH' 'default' 'hunt",
        );
        let s = scrub(e, Some("hunter2"));
        assert_eq!(s.message(), "ERR unknown command 'HELLO'");
        assert_eq!(s.code(), ErrorCode::Server);
        assert_eq!(s.server_code(), Some("ERR"));
        let s = scrub(Error::server("ERR bad hunter2 here"), Some("hunter2"));
        assert_eq!(s.message(), "ERR bad *** here");
        let e = Error::server("WRONGPASS invalid username-password pair");
        assert_eq!(scrub(e.clone(), Some("x")), e);
    }

    #[tokio::test]
    async fn hello_unknown_falls_back_to_auth_and_setname() {
        let server = MockServer::start(|cmd| match cmd[0].as_slice() {
            b"HELLO" => Action::reply(
                "-ERR unknown command 'HELLO', with args beginning with: '3' 'AUTH' 'bob' 's3cret'\r\n",
            ),
            b"AUTH" | b"CLIENT" => Action::reply("+OK\r\n"),
            b"SELECT" => Action::reply("+OK\r\n"),
            b"PING" => Action::reply("+PONG\r\n"),
            _ => Action::reply("-ERR unexpected\r\n"),
        })
        .await;
        let options = ConnectOptions {
            auth: Some(creds(Some("bob"), "s3cret")),
            client_name: Some("me".into()),
            db: 2,
            ..opts(Protocol::Resp3)
        };
        let conn = Connection::connect(server.addr, &options).await.unwrap();
        assert_eq!(conn.protocol(), Protocol::Resp2);
        assert_eq!(
            conn.request(&["PING"]).await.unwrap(),
            crate::resp::Value::Simple("PONG".into())
        );
        drop(conn);
        let seen = server.commands().await;
        let names: Vec<String> = seen
            .iter()
            .map(|c| String::from_utf8_lossy(&c.join(&b' ')).into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "HELLO 3 AUTH bob s3cret SETNAME me",
                "AUTH bob s3cret",
                "CLIENT SETNAME me",
                "SELECT 2",
                "PING"
            ]
        );
    }

    #[tokio::test]
    async fn resp2_without_username_sends_password_only() {
        let server = MockServer::start(|_| Action::reply("+OK\r\n")).await;
        let options = ConnectOptions {
            auth: Some(creds(None, "pw")),
            ..opts(Protocol::Resp2)
        };
        let conn = Connection::connect(server.addr, &options).await.unwrap();
        drop(conn);
        let seen = server.commands().await;
        assert_eq!(seen, vec![vec![b"AUTH".to_vec(), b"pw".to_vec()]]);
    }

    #[tokio::test]
    async fn hello_with_default_user_and_resp3_reply() {
        let server = MockServer::start(|cmd| match cmd[0].as_slice() {
            b"HELLO" => Action::reply("%2\r\n+server\r\n+redis\r\n+proto\r\n:3\r\n"),
            _ => Action::reply("_\r\n"),
        })
        .await;
        let options = ConnectOptions {
            auth: Some(creds(None, "pw")),
            ..opts(Protocol::Resp3)
        };
        let conn = Connection::connect(server.addr, &options).await.unwrap();
        assert_eq!(conn.protocol(), Protocol::Resp3);
        assert_eq!(
            conn.request(&["GET", "x"]).await.unwrap(),
            crate::resp::Value::Nil
        );
        drop(conn);
        let seen = server.commands().await;
        assert_eq!(
            seen[0],
            ["HELLO", "3", "AUTH", "default", "pw"].map(|s| s.as_bytes().to_vec())
        );
    }

    #[tokio::test]
    async fn wrongpass_is_an_auth_error_without_the_password() {
        let server = MockServer::start(|_| {
            Action::reply("-WRONGPASS invalid username-password pair or user is disabled.\r\n")
        })
        .await;
        let options = ConnectOptions {
            auth: Some(creds(Some("bob"), "topsecret")),
            ..opts(Protocol::Resp3)
        };
        let err = Connection::connect(server.addr, &options)
            .await
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::Auth);
        assert!(!err.to_string().contains("topsecret"), "{err}");
        assert!(!format!("{err:?}").contains("topsecret"));
        assert!(err.to_string().contains(&server.addr.to_string()), "{err}");
        // No RESP2 retry after a refused password.
        assert_eq!(server.commands().await.len(), 1);
    }

    #[tokio::test]
    async fn auth_errors_on_the_resp2_path_are_scrubbed() {
        let server = MockServer::start(|cmd| match cmd[0].as_slice() {
            b"HELLO" => Action::reply("-ERR unknown command 'HELLO'\r\n"),
            _ => Action::reply(
                "-ERR unknown command 'AUTH', with args beginning with: 'topsecret'\r\n",
            ),
        })
        .await;
        let options = ConnectOptions {
            auth: Some(creds(None, "topsecret")),
            ..opts(Protocol::Resp3)
        };
        let err = Connection::connect(server.addr, &options)
            .await
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::Server);
        assert!(!err.to_string().contains("topsecret"), "{err}");
    }

    #[tokio::test]
    async fn handshake_respects_the_connect_timeout() {
        let server = MockServer::start(|_| Action::Silent).await;
        let options = ConnectOptions {
            connect_timeout: Duration::from_millis(150),
            ..opts(Protocol::Resp3)
        };
        let started = std::time::Instant::now();
        let err = Connection::connect(server.addr, &options)
            .await
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::Timeout);
        assert!(err.to_string().contains(&server.addr.to_string()));
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}
