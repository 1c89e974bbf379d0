//! Silent cuts between hosts of a [`Lan`]: packets from a cut-off host are dropped by the
//! receiver (`ip rule add pref 10 from ADDR iif eth0 blackhole`), so the sender sees what a real
//! partition shows — no answer, no reset, its connect and its writes time out — rather than an
//! immediate error. A cut is always made on both receivers, so it holds in both directions.

use std::collections::BTreeSet;

use super::lan::{Lan, HOST_IFACE};
use crate::netns::ip_in;
use crate::TestkitError;

/// Rule priority of the cuts: before the local-table lookup the LAN moved to 100.
const CUT_PREF: &str = "10";

/// The cuts in force on one LAN, as (receiver, sender) host indexes; the rules exist in the
/// receivers' namespaces exactly for these pairs.
#[derive(Debug, Default)]
pub struct Cuts {
    active: BTreeSet<(usize, usize)>,
}

impl Cuts {
    /// Pairs (receiver, sender) currently cut.
    pub fn active(&self) -> &BTreeSet<(usize, usize)> {
        &self.active
    }

    /// True when `a` and `b` cannot hear each other.
    pub fn is_cut(&self, a: usize, b: usize) -> bool {
        self.active.contains(&(a, b))
    }

    /// Cuts every host of `side_a` from every host of `side_b`, both ways; pairs already cut stay
    /// cut, a host on both sides is an error.
    pub fn cut(
        &mut self,
        lan: &Lan,
        side_a: &[usize],
        side_b: &[usize],
    ) -> Result<(), TestkitError> {
        if let Some(h) = side_a.iter().find(|h| side_b.contains(h)) {
            return Err(TestkitError::Setup(format!(
                "host {} is on both sides of a cut",
                lan.host(*h).role()
            )));
        }
        for &a in side_a {
            for &b in side_b {
                self.drop_from(lan, a, b)?;
                self.drop_from(lan, b, a)?;
            }
        }
        Ok(())
    }

    /// Splits the LAN into `groups`: hosts in different groups cannot hear each other; hosts in
    /// no group keep hearing everyone. Adds to the cuts in force.
    pub fn partition(&mut self, lan: &Lan, groups: &[Vec<usize>]) -> Result<(), TestkitError> {
        for (i, a) in groups.iter().enumerate() {
            for b in &groups[i + 1..] {
                self.cut(lan, a, b)?;
            }
        }
        Ok(())
    }

    /// Removes every cut; a rule that cannot be deleted is reported (and forgotten: its
    /// namespace is deleted with the LAN anyway).
    pub fn heal(&mut self, lan: &Lan) -> Result<(), TestkitError> {
        let mut first_err = None;
        for (receiver, sender) in std::mem::take(&mut self.active) {
            if let Err(e) = rule(lan, "del", receiver, sender) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    fn drop_from(&mut self, lan: &Lan, receiver: usize, sender: usize) -> Result<(), TestkitError> {
        if self.active.contains(&(receiver, sender)) {
            return Ok(());
        }
        rule(lan, "add", receiver, sender)?;
        self.active.insert((receiver, sender));
        Ok(())
    }
}

fn rule(lan: &Lan, verb: &str, receiver: usize, sender: usize) -> Result<(), TestkitError> {
    let from = lan.host(sender).ip().to_string();
    ip_in(
        lan.host(receiver).netns(),
        &[
            "rule",
            verb,
            "pref",
            CUT_PREF,
            "from",
            &from,
            "iif",
            HOST_IFACE,
            "blackhole",
        ],
    )
}
