//! The per-connection state a client built on its session (protocol, credentials, database,
//! name, READONLY, subscriptions), recorded from the requests the server accepted, and the
//! commands that rebuild it on a new upstream after a move.
//!
//! Credentials are the client's own, kept only in memory and zeroed when dropped: the proxy
//! needs them to authenticate the session's next upstream as the client did on its first.

use std::collections::BTreeSet;

use bytes::Bytes;
use zeroize::Zeroizing;

use super::command::{Family, Kind};

/// What a session has set on its connection, as the server confirmed it.
#[derive(Default)]
pub(super) struct State {
    /// `HELLO <n>` accepted: the protocol the client reads (2 or 3).
    pub(super) hello: Option<u8>,
    /// `AUTH` / `HELLO .. AUTH` accepted: user (None for the default user) and password.
    auth: Option<(Option<Bytes>, Zeroizing<Vec<u8>>)>,
    db: Option<Bytes>,
    name: Option<Bytes>,
    info: Vec<(Bytes, Bytes)>,
    readonly: bool,
    /// `CLIENT TRACKING ON`: such a session cannot move (its cache could not be invalidated).
    pub(super) tracking: bool,
    /// `MONITOR`: the rest of the connection is the server's feed.
    pub(super) monitor: bool,
    /// Channels, patterns and shard channels, as the server confirmed them.
    subscriptions: [BTreeSet<Bytes>; 3],
}

/// Redacted: the state holds the client's password.
impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("hello", &self.hello)
            .field("authenticated", &self.auth.is_some())
            .field("subscriptions", &self.subscription_count())
            .finish_non_exhaustive()
    }
}

impl State {
    /// Whether replies are RESP3 (after `HELLO 3`).
    pub(super) fn resp3(&self) -> bool {
        self.hello == Some(3)
    }

    /// Whether the client authenticated itself on this session.
    pub(super) fn authenticated(&self) -> bool {
        self.auth.is_some()
    }

    /// Channels, patterns and shard channels subscribed in all.
    pub(super) fn subscription_count(&self) -> usize {
        self.subscriptions.iter().map(BTreeSet::len).sum()
    }

    /// Members of one family.
    pub(super) fn subscribed(&self, family: Family) -> usize {
        self.subscriptions[family.index()].len()
    }

    /// Records a confirmation: `channel` joined (`on`) or left `family`.
    pub(super) fn confirm(&mut self, family: Family, on: bool, channel: Option<Bytes>) {
        let set = &mut self.subscriptions[family.index()];
        match (on, channel) {
            (true, Some(c)) => {
                set.insert(c);
            }
            (false, Some(c)) => {
                set.remove(&c);
            }
            (_, None) => {}
        }
    }

    /// Records what a request the server accepted (a non-error reply) set on the connection.
    pub(super) fn accepted(&mut self, kind: &Kind, args: &[Bytes]) {
        match kind {
            Kind::Auth => self.auth = credentials(&args[1..]),
            Kind::Hello => self.hello_accepted(args),
            Kind::Select => self.db = args.get(1).cloned(),
            Kind::SetName => self.name = args.get(2).cloned().filter(|n| !n.is_empty()),
            Kind::SetInfo => {
                if let (Some(attr), Some(value)) = (args.get(2), args.get(3)) {
                    self.info.retain(|(a, _)| !a.eq_ignore_ascii_case(attr));
                    self.info.push((attr.clone(), value.clone()));
                }
            }
            Kind::Tracking => {
                self.tracking = args.get(2).is_some_and(|a| a.eq_ignore_ascii_case(b"on"))
            }
            Kind::ReadOnly(on) => self.readonly = *on,
            Kind::Monitor => self.monitor = true,
            Kind::Reset => *self = State::default(),
            _ => {}
        }
    }

    fn hello_accepted(&mut self, args: &[Bytes]) {
        let mut rest = args[1..].iter();
        if let Some(proto) = rest.next() {
            self.hello = std::str::from_utf8(proto).ok().and_then(|p| p.parse().ok());
        }
        while let Some(option) = rest.next() {
            if option.eq_ignore_ascii_case(b"auth") {
                let user = rest.next().cloned();
                let pass = rest.next().cloned();
                if let (Some(user), Some(pass)) = (user, pass) {
                    self.auth = Some((Some(user), Zeroizing::new(pass.to_vec())));
                }
            } else if option.eq_ignore_ascii_case(b"setname") {
                self.name = rest.next().cloned();
            }
        }
    }

    /// The commands that rebuild this state on a fresh connection, in order, and how many
    /// subscription confirmations they will bring (swallowed: the client has had its own).
    /// `lent` authenticates a session whose client did not (only when the listener lends the
    /// URL's credentials).
    pub(super) fn replay(&self, lent: Option<(Option<&str>, &str)>) -> (Vec<Vec<Vec<u8>>>, usize) {
        let mut out: Vec<Vec<Vec<u8>>> = Vec::new();
        let auth: Option<(Option<Vec<u8>>, Vec<u8>)> = match (&self.auth, lent) {
            (Some((user, pass)), _) => Some((user.as_ref().map(|u| u.to_vec()), pass.to_vec())),
            (None, Some((user, pass))) => Some((
                user.map(|u| u.as_bytes().to_vec()),
                pass.as_bytes().to_vec(),
            )),
            (None, None) => None,
        };
        match (self.hello, auth) {
            (Some(proto), auth) => {
                let mut hello = vec![b"HELLO".to_vec(), proto.to_string().into_bytes()];
                if let Some((user, pass)) = auth {
                    hello.push(b"AUTH".to_vec());
                    hello.push(user.unwrap_or_else(|| b"default".to_vec()));
                    hello.push(pass);
                }
                out.push(hello);
            }
            (None, Some((user, pass))) => {
                let mut cmd = vec![b"AUTH".to_vec()];
                cmd.extend(user);
                cmd.push(pass);
                out.push(cmd);
            }
            (None, None) => {}
        }
        if let Some(db) = self.db.as_ref().filter(|d| d.as_ref() != b"0") {
            out.push(vec![b"SELECT".to_vec(), db.to_vec()]);
        }
        if let Some(name) = &self.name {
            out.push(vec![b"CLIENT".to_vec(), b"SETNAME".to_vec(), name.to_vec()]);
        }
        for (attr, value) in &self.info {
            out.push(vec![
                b"CLIENT".to_vec(),
                b"SETINFO".to_vec(),
                attr.to_vec(),
                value.to_vec(),
            ]);
        }
        if self.readonly {
            out.push(vec![b"READONLY".to_vec()]);
        }
        let mut confirmations = 0;
        for family in Family::ALL {
            let set = &self.subscriptions[family.index()];
            if !set.is_empty() {
                let mut cmd = vec![family.subscribe().to_vec()];
                cmd.extend(set.iter().map(|c| c.to_vec()));
                confirmations += set.len();
                out.push(cmd);
            }
        }
        (out, confirmations)
    }
}

/// `AUTH pass` or `AUTH user pass`.
fn credentials(args: &[Bytes]) -> Option<(Option<Bytes>, Zeroizing<Vec<u8>>)> {
    match args {
        [pass] => Some((None, Zeroizing::new(pass.to_vec()))),
        [user, pass] => Some((Some(user.clone()), Zeroizing::new(pass.to_vec()))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::proxy::command::args as a;

    fn text(cmds: &[Vec<Vec<u8>>]) -> Vec<String> {
        cmds.iter()
            .map(|c| {
                c.iter()
                    .map(|w| String::from_utf8_lossy(w).into_owned())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    }

    #[test]
    fn replay_rebuilds_what_the_server_accepted_in_order() {
        let mut s = State::default();
        s.accepted(
            &Kind::Hello,
            &a(&["HELLO", "3", "AUTH", "app", "pw", "SETNAME", "n1"]),
        );
        s.accepted(&Kind::Select, &a(&["SELECT", "4"]));
        s.accepted(&Kind::SetInfo, &a(&["CLIENT", "SETINFO", "lib-name", "x"]));
        s.confirm(Family::Channels, true, Some(Bytes::from_static(b"c1")));
        s.confirm(Family::Patterns, true, Some(Bytes::from_static(b"p*")));
        s.confirm(Family::Channels, true, Some(Bytes::from_static(b"c2")));
        s.confirm(Family::Channels, false, Some(Bytes::from_static(b"c1")));
        let (cmds, confirmations) = s.replay(None);
        assert_eq!(
            text(&cmds),
            [
                "HELLO 3 AUTH app pw",
                "SELECT 4",
                "CLIENT SETNAME n1",
                "CLIENT SETINFO lib-name x",
                "SUBSCRIBE c2",
                "PSUBSCRIBE p*"
            ]
        );
        assert_eq!(confirmations, 2);
        assert!(!format!("{s:?}").contains("pw"));
    }

    #[test]
    fn plain_auth_replays_as_auth_and_reset_forgets_everything() {
        let mut s = State::default();
        s.accepted(&Kind::Auth, &a(&["AUTH", "secret"]));
        s.accepted(&Kind::ReadOnly(true), &a(&["READONLY"]));
        assert_eq!(text(&s.replay(None).0), ["AUTH secret", "READONLY"]);
        s.accepted(&Kind::Reset, &a(&["RESET"]));
        assert!(s.replay(None).0.is_empty());
        assert_eq!(text(&s.replay(Some((Some("u"), "p"))).0), ["AUTH u p"]);
    }
}
