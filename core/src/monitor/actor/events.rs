//! What a sentinel event means for the monitor, judged from what it knows of the primary; the
//! monitor acts on the meaning.

use super::primary::Primary;
use crate::sentinel::events::{InstanceKind, SentinelEvent};
use crate::types::Address;

/// The reason given for events about replicas (and other sentinels' view of them).
pub(super) const REPLICA_EVENT: &str = "replica event";

/// What one sentinel event asks of the monitor.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Meaning {
    /// Nothing the monitor does not know already.
    Nothing,
    /// A round, for this reason ([`REPLICA_EVENT`] when only the replicas may have changed).
    Round(&'static str),
    /// A sentinel switched to this primary: verify it with ROLE before adopting it.
    Switch(Address),
    /// The failover leader started promoting `promoting` to replace `old`.
    Promotion {
        promoting: Address,
        old: Option<Address>,
    },
    /// The failover that was demoting `primary` gave up (`event` says why).
    Aborted { primary: Address, event: String },
    /// Another sentinel of the service announced itself.
    Sentinel { address: Address, run_id: String },
    /// The sentinel that published it entered (true) or left TILT.
    Tilt(bool),
}

/// What `event` (about the monitor's own service) means, given what the monitor knows of the
/// primary.
pub(super) fn meaning(event: SentinelEvent, primary: &Primary) -> Meaning {
    match event {
        SentinelEvent::SwitchMaster { new, .. } => {
            if primary.is(&new) && primary.healthy {
                // A sentinel caught up with a switch made on an announcement: one round now
                // reads the new epoch, replicas and peers from the sentinels.
                if primary.confirmed {
                    return Meaning::Nothing;
                }
                return Meaning::Round("+switch-master");
            }
            Meaning::Switch(new)
        }
        SentinelEvent::Instance { event, instance }
            if event == "+failover-state-send-slaveof-noone" =>
        {
            Meaning::Promotion {
                promoting: instance.address,
                old: instance.master,
            }
        }
        SentinelEvent::Instance { event, instance }
            if event == "-failover-abort-slave-timeout"
                || event == "-failover-abort-no-good-slave" =>
        {
            Meaning::Aborted {
                primary: instance.address,
                event,
            }
        }
        SentinelEvent::Instance { event, .. } if event == "-failover-abort-not-elected" => {
            Meaning::Nothing
        }
        SentinelEvent::Instance { event, instance } if event == "+sentinel" => Meaning::Sentinel {
            address: instance.address,
            run_id: instance.name,
        },
        // About the master itself, only what can change the answer: going down while we think
        // it healthy, coming back while we don't. Confirmations of a state already known (a
        // second +odown, -odown after the switch, +failover-end for a primary already left)
        // would each cost a round and tell nothing new; the retry schedule covers the rest.
        SentinelEvent::Instance { event, instance } if instance.kind == InstanceKind::Master => {
            let ours = primary.is(&instance.address);
            let reason = match event.as_str() {
                "+sdown" | "+odown" => (primary.healthy && ours).then_some("primary reported down"),
                "-sdown" | "-odown" => (!primary.healthy).then_some("primary reported up"),
                "+failover-end" => ours.then_some("+failover-end"),
                _ => Some("sentinel event"),
            };
            reason.map_or(Meaning::Nothing, Meaning::Round)
        }
        SentinelEvent::Instance { .. } => Meaning::Round(REPLICA_EVENT),
        SentinelEvent::Tilt { entered } => Meaning::Tilt(entered),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sentinel::events::Instance;

    fn following(port: u16, healthy: bool, confirmed: bool) -> Primary {
        let mut primary = Primary::new();
        primary.address = Some(Address::new("127.0.0.1", port));
        primary.healthy = healthy;
        primary.confirmed = confirmed;
        primary
    }

    fn about_master(event: &str, port: u16) -> SentinelEvent {
        SentinelEvent::Instance {
            event: event.to_string(),
            instance: Instance {
                kind: InstanceKind::Master,
                name: "mymaster".to_string(),
                address: Address::new("127.0.0.1", port),
                service: "mymaster".to_string(),
                master: None,
            },
        }
    }

    #[test]
    fn a_switch_to_the_primary_asks_for_a_round_only_until_one_confirms_it() {
        let switch = |port| SentinelEvent::SwitchMaster {
            service: "mymaster".to_string(),
            old: Address::new("127.0.0.1", 1),
            new: Address::new("127.0.0.1", port),
        };
        assert_eq!(
            meaning(switch(2), &following(2, true, false)),
            Meaning::Round("+switch-master")
        );
        assert_eq!(
            meaning(switch(2), &following(2, true, true)),
            Meaning::Nothing
        );
        assert_eq!(
            meaning(switch(3), &following(2, true, true)),
            Meaning::Switch(Address::new("127.0.0.1", 3))
        );
    }

    #[test]
    fn the_master_going_down_or_up_matters_only_when_it_changes_the_answer() {
        // (event, port it names, whether the primary on port 2 is healthy, what it means)
        let cases = [
            ("+odown", 2, true, Some("primary reported down")),
            ("+odown", 3, true, None),
            ("+sdown", 2, false, None),
            ("-sdown", 2, true, None),
            ("-odown", 2, false, Some("primary reported up")),
            ("+failover-end", 3, true, None),
            ("+failover-end", 2, true, Some("+failover-end")),
        ];
        for (event, port, healthy, round) in cases {
            let expected = round.map_or(Meaning::Nothing, Meaning::Round);
            let got = meaning(about_master(event, port), &following(2, healthy, true));
            assert_eq!(got, expected, "{event} for port {port}, healthy: {healthy}");
        }
    }
}
