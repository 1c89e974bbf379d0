//! Parsing of the messages sentinels publish on their event channels.
//!
//! Formats (sentinel.c `sentinelEvent`): most events carry instance details
//! `<type> <name> <ip> <port> [@ <master-name> <master-ip> <master-port>]`, sometimes followed by
//! extra text such as `#quorum 2/2`. The service of a replica or sentinel event is the name after
//! `@`, never the first word (reading the first word as the service is the bug that made one
//! client refresh a service literally called "sentinel"). `+switch-master` carries
//! `<master-name> <old-ip> <old-port> <new-ip> <new-port>`; `+tilt`/`-tilt` carry no instance.

use crate::error::{Error, Result};
use crate::types::Address;

/// The channels the monitor subscribes to: the events that can change the view of a service.
/// The last four announce and abort promotions, for fencing writes; a sentinel whose ACL does
/// not allow them is subscribed to [`BASE_CHANNELS`] instead.
pub const CHANNELS: &[&str] = &[
    "+switch-master",
    "+sdown",
    "-sdown",
    "+odown",
    "-odown",
    "+slave",
    "+convert-to-slave",
    "+sentinel",
    "+tilt",
    "-tilt",
    "+failover-end",
    "+reset-master",
    "+failover-state-send-slaveof-noone",
    "-failover-abort-not-elected",
    "-failover-abort-no-good-slave",
    "-failover-abort-slave-timeout",
];

/// [`CHANNELS`] without the promotion channels: what older ACLs granted.
pub const BASE_CHANNELS: &[&str] = CHANNELS.split_at(12).0;

/// Kind of instance an event is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstanceKind {
    /// The monitored primary.
    Master,
    /// A replica.
    Replica,
    /// Another sentinel.
    Sentinel,
}

/// The instance an event is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    /// Master, replica or sentinel.
    pub kind: InstanceKind,
    /// The instance's name: the service for a master, `ip:port` for a replica, the run id for a
    /// sentinel.
    pub name: String,
    /// The address it was announced with.
    pub address: Address,
    /// The service this instance belongs to.
    pub service: String,
    /// The service's primary, given for replicas and sentinels.
    pub master: Option<Address>,
}

/// One parsed sentinel event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SentinelEvent {
    /// `+switch-master`: the service's primary moved.
    SwitchMaster {
        /// The service.
        service: String,
        /// The primary before.
        old: Address,
        /// The primary now.
        new: Address,
    },
    /// An event about one instance (`+sdown`, `+slave`, `+sentinel`, ...).
    Instance {
        /// The channel, e.g. `+sdown`.
        event: String,
        /// The instance it concerns.
        instance: Instance,
    },
    /// `+tilt` (entered) or `-tilt` (left): the sentinel's own timing is unreliable.
    Tilt {
        /// Whether TILT was entered.
        entered: bool,
    },
}

impl SentinelEvent {
    /// Applies `address_map` to every address the event reports, so the monitor compares and
    /// connects to addresses as the client reaches them.
    pub fn map_addresses(&mut self, map: &crate::config::AddressMap) {
        if map.is_empty() {
            return;
        }
        match self {
            SentinelEvent::SwitchMaster { old, new, .. } => {
                *old = map.apply(old);
                *new = map.apply(new);
            }
            SentinelEvent::Instance { instance, .. } => {
                instance.address = map.apply(&instance.address);
                if let Some(master) = &mut instance.master {
                    *master = map.apply(master);
                }
            }
            SentinelEvent::Tilt { .. } => {}
        }
    }

    /// The service the event concerns; `None` for events that concern the sentinel itself (TILT).
    pub fn service(&self) -> Option<&str> {
        match self {
            SentinelEvent::SwitchMaster { service, .. } => Some(service),
            SentinelEvent::Instance { instance, .. } => Some(&instance.service),
            SentinelEvent::Tilt { .. } => None,
        }
    }
}

/// Parses one published message. Errors are protocol errors naming the channel; a caller skips
/// such a message rather than trusting part of it.
pub fn parse(channel: &[u8], payload: &[u8]) -> Result<SentinelEvent> {
    let channel = std::str::from_utf8(channel)
        .map_err(|_| Error::protocol("sentinel event channel is not UTF-8"))?;
    let payload = std::str::from_utf8(payload)
        .map_err(|_| Error::protocol(format!("{channel} payload is not UTF-8")))?;
    let bad =
        |why: &str| Error::protocol(format!("malformed {channel} event ({why}): '{payload}'"));
    let words: Vec<&str> = payload.split_ascii_whitespace().collect();
    match channel {
        "+switch-master" => {
            let [service, old_ip, old_port, new_ip, new_port] = words[..] else {
                return Err(bad("expected 5 words"));
            };
            Ok(SentinelEvent::SwitchMaster {
                service: service.to_string(),
                old: parse_address(old_ip, old_port).ok_or_else(|| bad("old address"))?,
                new: parse_address(new_ip, new_port).ok_or_else(|| bad("new address"))?,
            })
        }
        "+tilt" | "-tilt" => Ok(SentinelEvent::Tilt {
            entered: channel == "+tilt",
        }),
        _ => {
            if words.len() < 4 {
                return Err(bad("expected <type> <name> <ip> <port>"));
            }
            let kind = match words[0] {
                "master" => InstanceKind::Master,
                "slave" | "replica" => InstanceKind::Replica,
                "sentinel" => InstanceKind::Sentinel,
                _ => return Err(bad("unknown instance type")),
            };
            let address =
                parse_address(words[2], words[3]).ok_or_else(|| bad("instance address"))?;
            let (service, master) = match words.get(4) {
                Some(&"@") => {
                    let [name, ip, port] = words
                        .get(5..8)
                        .and_then(|w| <[&str; 3]>::try_from(w).ok())
                        .ok_or_else(|| bad("expected @ <master-name> <ip> <port>"))?;
                    (
                        name.to_string(),
                        Some(parse_address(ip, port).ok_or_else(|| bad("master address"))?),
                    )
                }
                _ if kind == InstanceKind::Master => (words[1].to_string(), None),
                _ => return Err(bad("replica or sentinel event without @ <master>")),
            };
            Ok(SentinelEvent::Instance {
                event: channel.to_string(),
                instance: Instance {
                    kind,
                    name: words[1].to_string(),
                    address,
                    service,
                    master,
                },
            })
        }
    }
}

fn parse_address(host: &str, port: &str) -> Option<Address> {
    let port: u16 = port.parse().ok().filter(|p| *p != 0)?;
    (!host.is_empty()).then(|| Address::new(host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_map_applies_to_every_address_of_an_event_and_keeps_the_announced_one() {
        let mut map = crate::config::AddressMap::default();
        map.set_entries(
            crate::config::AddressMap::parse("10.0.0.1:6379>127.0.0.1:16379,10.0.0.2:6379>h:2")
                .unwrap(),
        );
        let mut e = parse(b"+switch-master", b"svc 10.0.0.1 6379 10.0.0.2 6379").unwrap();
        e.map_addresses(&map);
        let SentinelEvent::SwitchMaster { old, new, .. } = &e else {
            panic!("{e:?}")
        };
        assert_eq!(
            (old, new),
            (&Address::new("127.0.0.1", 16379), &Address::new("h", 2))
        );
        assert_eq!(
            new.announced.as_deref(),
            Some(&Address::new("10.0.0.2", 6379))
        );
        let mut e = parse(
            b"+slave",
            b"slave 10.0.0.2:6379 10.0.0.2 6379 @ svc 10.0.0.1 6379",
        )
        .unwrap();
        e.map_addresses(&map);
        let SentinelEvent::Instance { instance, .. } = &e else {
            panic!("{e:?}")
        };
        assert_eq!(instance.address, Address::new("h", 2));
        assert_eq!(instance.master, Some(Address::new("127.0.0.1", 16379)));
        // The name is the sentinel's text and stays as it was.
        assert_eq!(instance.name, "10.0.0.2:6379");
    }

    #[test]
    fn base_channels_are_the_channels_without_the_promotion_ones() {
        assert_eq!(BASE_CHANNELS.len() + 4, CHANNELS.len());
        assert!(BASE_CHANNELS.contains(&"+switch-master"));
        assert!(BASE_CHANNELS.contains(&"+reset-master"));
        assert!(!BASE_CHANNELS.iter().any(
            |c| c.starts_with("-failover-abort") || *c == "+failover-state-send-slaveof-noone"
        ));
    }

    fn p(channel: &str, payload: &str) -> Result<SentinelEvent> {
        parse(channel.as_bytes(), payload.as_bytes())
    }

    #[test]
    fn switch_master() {
        assert_eq!(
            p("+switch-master", "mymaster 127.0.0.1 6379 127.0.0.1 6380").unwrap(),
            SentinelEvent::SwitchMaster {
                service: "mymaster".into(),
                old: Address::new("127.0.0.1", 6379),
                new: Address::new("127.0.0.1", 6380),
            }
        );
        assert!(p("+switch-master", "mymaster 127.0.0.1 6379 127.0.0.1").is_err());
        assert!(p("+switch-master", "mymaster 127.0.0.1 6379 127.0.0.1 x").is_err());
        assert!(p("+switch-master", "mymaster 127.0.0.1 0 127.0.0.1 6380").is_err());
        assert!(p("+switch-master", "mymaster 127.0.0.1 6379 127.0.0.1 65536").is_err());
    }

    #[test]
    fn master_events_name_the_service_first() {
        let e = p("+odown", "master mymaster 127.0.0.1 6379 #quorum 2/2").unwrap();
        assert_eq!(e.service(), Some("mymaster"));
        let SentinelEvent::Instance { instance, event } = e else {
            panic!()
        };
        assert_eq!(event, "+odown");
        assert_eq!(instance.kind, InstanceKind::Master);
        assert_eq!(instance.address, Address::new("127.0.0.1", 6379));
        assert_eq!(instance.master, None);
        let e = p("+sdown", "master mymaster 127.0.0.1 6379").unwrap();
        assert_eq!(e.service(), Some("mymaster"));
    }

    #[test]
    fn replica_and_sentinel_events_read_the_service_after_the_at_sign() {
        let e = p(
            "+slave",
            "slave 127.0.0.1:6381 127.0.0.1 6381 @ mymaster 127.0.0.1 6379",
        )
        .unwrap();
        assert_eq!(e.service(), Some("mymaster"));
        let e = p(
            "+sentinel",
            "sentinel 1f7b8c0ad41d9c2e5a4a3f2b1c0d9e8f7a6b5c4d 10.0.0.7 26380 @ cache 10.0.0.1 6379",
        )
        .unwrap();
        let SentinelEvent::Instance { instance, .. } = &e else {
            panic!()
        };
        assert_eq!(instance.kind, InstanceKind::Sentinel);
        assert_eq!(
            instance.service, "cache",
            "never the literal word 'sentinel'"
        );
        assert_eq!(instance.name, "1f7b8c0ad41d9c2e5a4a3f2b1c0d9e8f7a6b5c4d");
        assert_eq!(instance.address, Address::new("10.0.0.7", 26380));
        assert_eq!(instance.master, Some(Address::new("10.0.0.1", 6379)));
        let e = p(
            "-sdown",
            "slave redis-1.example:6379 redis-1.example 6379 @ svc redis-0.example 6379",
        )
        .unwrap();
        assert_eq!(e.service(), Some("svc"));
        let e = p(
            "+convert-to-slave",
            "slave 127.0.0.1:6379 127.0.0.1 6379 @ mymaster 127.0.0.1 6380",
        )
        .unwrap();
        assert_eq!(e.service(), Some("mymaster"));
    }

    #[test]
    fn tilt_concerns_no_service() {
        assert_eq!(
            p("+tilt", "#tilt mode entered").unwrap(),
            SentinelEvent::Tilt { entered: true }
        );
        assert_eq!(
            p("-tilt", "#tilt mode exited").unwrap(),
            SentinelEvent::Tilt { entered: false }
        );
        assert_eq!(p("+tilt", "").unwrap().service(), None);
    }

    #[test]
    fn malformed_events_are_errors_not_panics() {
        for (ch, payload) in [
            ("+sdown", ""),
            ("+sdown", "master"),
            ("+sdown", "dragon x 127.0.0.1 6379"),
            ("+slave", "slave 1.2.3.4:5 1.2.3.4 5"),
            ("+slave", "slave 1.2.3.4:5 1.2.3.4 5 @ svc 1.2.3.4"),
            ("+slave", "slave 1.2.3.4:5 1.2.3.4 -1 @ svc 1.2.3.4 6379"),
            ("+sentinel", "sentinel id 1.2.3.4 26379 @ svc 1.2.3.4 nope"),
        ] {
            let err = p(ch, payload).unwrap_err();
            assert_eq!(err.code(), crate::ErrorCode::Protocol, "{ch} {payload}");
        }
        assert!(parse(b"+sdown", &[0xff, 0xfe]).is_err());
    }

    /// Real sentinel payloads (Redis 7.0 `sentinelEvent` formats), framed as a sentinel sends them
    /// on a RESP2 and on a RESP3 connection, through the connection's subscription and the parser.
    async fn framed(protocol: crate::Protocol) {
        use crate::resp::test_server::{Action, MockServer};
        use crate::resp::{ConnectOptions, Connection};
        const EVENTS: &[(&str, &str, Option<&str>)] = &[
            (
                "+switch-master",
                "mymaster 127.0.0.1 6379 127.0.0.1 6380",
                Some("mymaster"),
            ),
            ("+sdown", "master mymaster 127.0.0.1 6379", Some("mymaster")),
            (
                "-sdown",
                "slave 127.0.0.1:6381 127.0.0.1 6381 @ mymaster 127.0.0.1 6379",
                Some("mymaster"),
            ),
            (
                "+odown",
                "master mymaster 127.0.0.1 6379 #quorum 2/2",
                Some("mymaster"),
            ),
            ("-odown", "master mymaster 127.0.0.1 6379", Some("mymaster")),
            (
                "+slave",
                "slave 127.0.0.1:6381 127.0.0.1 6381 @ mymaster 127.0.0.1 6379",
                Some("mymaster"),
            ),
            (
                "+convert-to-slave",
                "slave 127.0.0.1:6379 127.0.0.1 6379 @ mymaster 127.0.0.1 6380",
                Some("mymaster"),
            ),
            (
                "+sentinel",
                "sentinel 6c2b2d3e 127.0.0.1 26380 @ mymaster 127.0.0.1 6379",
                Some("mymaster"),
            ),
            ("+tilt", "#tilt mode entered", None),
            ("-tilt", "#tilt mode exited", None),
            (
                "+failover-end",
                "master mymaster 127.0.0.1 6379",
                Some("mymaster"),
            ),
            ("+reset-master", "master other 10.0.0.1 6379", Some("other")),
        ];
        let resp3 = protocol == crate::Protocol::Resp3;
        let bulk = |s: &str| format!("${}\r\n{s}\r\n", s.len());
        let head = |n: usize| {
            if resp3 {
                format!(">{n}\r\n")
            } else {
                format!("*{n}\r\n")
            }
        };
        let mut wire = String::new();
        for (i, channel) in CHANNELS.iter().enumerate() {
            wire += &format!(
                "{}{}{}:{}\r\n",
                head(3),
                bulk("subscribe"),
                bulk(channel),
                i + 1
            );
        }
        for (channel, payload, _) in EVENTS {
            wire += &format!(
                "{}{}{}{}",
                head(3),
                bulk("message"),
                bulk(channel),
                bulk(payload)
            );
        }
        let server = MockServer::start(move |cmd| match cmd[0].as_slice() {
            b"HELLO" if resp3 => Action::reply("%1\r\n$5\r\nproto\r\n:3\r\n"),
            b"HELLO" => Action::reply("-ERR unknown command 'HELLO'\r\n"),
            b"SUBSCRIBE" => Action::Close(wire.clone().into_bytes()),
            _ => Action::reply("+OK\r\n"),
        })
        .await;
        let options = ConnectOptions {
            protocol,
            ..ConnectOptions::default()
        };
        let conn = Connection::connect(server.addr, &options).await.unwrap();
        assert_eq!(conn.protocol(), protocol);
        let mut sub = conn
            .subscribe(CHANNELS, std::time::Duration::from_secs(2))
            .await
            .unwrap();
        let mut parsed = Vec::new();
        while let Some((channel, payload)) = sub.next().await {
            parsed.push(parse(&channel, &payload).unwrap());
        }
        assert_eq!(parsed.len(), EVENTS.len());
        for (event, (channel, _, service)) in parsed.iter().zip(EVENTS) {
            assert_eq!(event.service(), *service, "{channel}");
            if let SentinelEvent::Instance { event, .. } = event {
                assert_eq!(event, channel);
            }
        }
        assert!(matches!(parsed[0], SentinelEvent::SwitchMaster { .. }));
        assert_eq!(parsed[8], SentinelEvent::Tilt { entered: true });
    }

    #[tokio::test]
    async fn every_event_format_over_resp2() {
        framed(crate::Protocol::Resp2).await;
    }

    #[tokio::test]
    async fn every_event_format_over_resp3() {
        framed(crate::Protocol::Resp3).await;
    }
}
