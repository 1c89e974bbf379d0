//! The list of sentinels to ask: configured seeds plus the ones learned from other sentinels.
//!
//! Append-only in meaning: a sentinel is never forgotten, only merged when two entries turn out to
//! be the same process — equal run id, or a resolved address in common. Merging keeps the entry
//! with a host name (so the name is kept and re-resolved), then the earlier one. This is what keeps
//! three configured DNS names plus the three IPs `SENTINEL SENTINELS` reports at three sentinels,
//! not six.

use std::net::{IpAddr, SocketAddr};

use crate::types::Address;
use crate::types::SentinelInfo;

/// One known sentinel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Stable identity inside this list, for the connections keyed on it.
    pub id: u64,
    /// Address as configured or as first reported.
    pub address: Address,
    /// Given in the configuration (seeds are never replaced by learned addresses).
    pub seed: bool,
    /// The last successful resolution of `address` (the address itself for IP literals).
    pub resolved: Vec<SocketAddr>,
    /// The sentinel's run id, once known.
    pub run_id: Option<String>,
    /// Another sentinel reported it `s_down`, `o_down` or `disconnected`.
    pub reported_down: bool,
    /// Our own last attempt to ask it succeeded.
    pub up: bool,
    /// In TILT, as it said (event or `INFO sentinel`).
    pub tilt: bool,
    /// When a `+tilt` / `-tilt` event from it last arrived: an `INFO` answer asked before that
    /// is older news.
    pub tilt_event_at: Option<std::time::Instant>,
    /// False once it answered that it does not monitor the service.
    pub knows_service: bool,
}

impl Entry {
    fn has_host_name(&self) -> bool {
        self.address.host.parse::<IpAddr>().is_err()
    }

    fn same_sentinel(&self, other: &Entry) -> bool {
        let same_run_id = matches!((&self.run_id, &other.run_id), (Some(a), Some(b)) if a == b);
        same_run_id
            || self.address == other.address
            || self.resolved.iter().any(|a| other.resolved.contains(a))
    }
}

/// The sentinels of one monitor, in asking order of preference.
#[derive(Clone, Debug, Default)]
pub struct SentinelList {
    entries: Vec<Entry>,
    next_id: u64,
}

/// IP literals resolve to themselves without a lookup.
fn literal(address: &Address) -> Vec<SocketAddr> {
    address
        .host
        .parse::<IpAddr>()
        .map(|ip| vec![SocketAddr::new(ip, address.port)])
        .unwrap_or_default()
}

impl SentinelList {
    /// A list of the configured sentinels, duplicates merged.
    pub fn new(seeds: &[Address]) -> SentinelList {
        let mut list = SentinelList::default();
        for seed in seeds {
            list.push(seed.clone(), true, None, false);
        }
        list
    }

    fn push(
        &mut self,
        address: Address,
        seed: bool,
        run_id: Option<String>,
        reported_down: bool,
    ) -> bool {
        let entry = Entry {
            id: self.next_id,
            resolved: literal(&address),
            address,
            seed,
            run_id,
            reported_down,
            up: false,
            tilt: false,
            tilt_event_at: None,
            knows_service: true,
        };
        self.next_id += 1;
        if let Some(existing) = self.entries.iter_mut().find(|e| e.same_sentinel(&entry)) {
            if existing.run_id.is_none() {
                existing.run_id = entry.run_id;
            }
            if !seed {
                existing.reported_down = reported_down;
            }
            return false;
        }
        self.entries.push(entry);
        true
    }

    /// Every entry, seeds first in configured order, then learned ones in order of learning.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The entry with this id.
    pub fn get(&self, id: u64) -> Option<&Entry> {
        self.entries.iter().find(|e| e.id == id)
    }

    /// Records a sentinel another sentinel reported (`SENTINEL SENTINELS`, `+sentinel`).
    /// Returns true when it was not known before.
    pub fn learn(&mut self, address: Address, run_id: Option<String>, reported_down: bool) -> bool {
        self.push(address, false, run_id, reported_down)
    }

    /// Records a fresh resolution of entry `id`, then merges entries now known to be the same.
    pub fn set_resolved(&mut self, id: u64, resolved: Vec<SocketAddr>) {
        if let Some(e) = self.entries.iter_mut().find(|e| e.id == id) {
            e.resolved = resolved;
        }
        self.merge_duplicates();
    }

    /// Records the run id a sentinel told us itself (`SENTINEL MYID`), then merges duplicates.
    pub fn set_run_id(&mut self, id: u64, run_id: String) {
        if let Some(e) = self.entries.iter_mut().find(|e| e.id == id) {
            e.run_id = Some(run_id);
        }
        self.merge_duplicates();
    }

    /// Records whether asking entry `id` just worked. Returns the new state if it changed.
    pub fn set_up(&mut self, id: u64, up: bool) -> Option<bool> {
        let e = self.entries.iter_mut().find(|e| e.id == id)?;
        if e.up == up {
            return None;
        }
        e.up = up;
        if up {
            e.reported_down = false;
        }
        Some(up)
    }

    /// Records whether entry `id` is in TILT, as of `asked` (when the `INFO` was sent, or when
    /// the event arrived, `from_event`). News older than the last event is ignored. Returns the
    /// new state if it changed.
    pub fn set_tilt(
        &mut self,
        id: u64,
        tilt: bool,
        asked: std::time::Instant,
        from_event: bool,
    ) -> Option<bool> {
        let e = self.entries.iter_mut().find(|e| e.id == id)?;
        if e.tilt_event_at.is_some_and(|at| asked < at) {
            return None;
        }
        if from_event {
            e.tilt_event_at = Some(asked);
        }
        (e.tilt != tilt).then(|| {
            e.tilt = tilt;
            tilt
        })
    }

    /// Records whether entry `id` monitors the service. Returns the new state if it changed.
    pub fn set_knows_service(&mut self, id: u64, knows: bool) -> Option<bool> {
        let e = self.entries.iter_mut().find(|e| e.id == id)?;
        (e.knows_service != knows).then(|| {
            e.knows_service = knows;
            knows
        })
    }

    /// The id of the entry with this address (as configured or reported, or one it resolved to).
    pub fn find(&self, address: &Address) -> Option<u64> {
        let literal = literal(address);
        self.entries
            .iter()
            .find(|e| e.address == *address || e.resolved.iter().any(|r| literal.contains(r)))
            .map(|e| e.id)
    }

    fn merge_duplicates(&mut self) {
        let mut i = 0;
        while i < self.entries.len() {
            let dup = (i + 1..self.entries.len())
                .find(|&j| self.entries[i].same_sentinel(&self.entries[j]));
            let Some(j) = dup else {
                i += 1;
                continue;
            };
            // Keep the better of the two at the earlier position: a named seed beats an IP seed,
            // any seed beats a learned entry.
            let rank = |e: &Entry| (e.seed, e.seed && e.has_host_name());
            if rank(&self.entries[j]) > rank(&self.entries[i]) {
                self.entries.swap(i, j);
            }
            let gone = self.entries.remove(j);
            let kept = &mut self.entries[i];
            kept.run_id = kept.run_id.take().or(gone.run_id);
            kept.up |= gone.up;
            for a in gone.resolved {
                if !kept.resolved.contains(&a) {
                    kept.resolved.push(a);
                }
            }
        }
    }

    /// Ids in the order to ask: sentinels not reported down first, then the ones reported down.
    pub fn ask_order(&self) -> Vec<u64> {
        let (ok, down): (Vec<&Entry>, Vec<&Entry>) =
            self.entries.iter().partition(|e| !e.reported_down);
        ok.into_iter().chain(down).map(|e| e.id).collect()
    }

    /// The public view for the topology snapshot.
    pub fn infos(&self) -> Vec<SentinelInfo> {
        self.entries
            .iter()
            .map(|e| SentinelInfo {
                host: e.address.host.clone(),
                port: e.address.port,
                announced: e.address.announced.as_deref().cloned(),
                up: e.up,
                tilt: e.tilt,
                knows_service: e.knows_service,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(host: &str, port: u16) -> Address {
        Address::new(host, port)
    }

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn duplicate_seeds_count_once() {
        let list = SentinelList::new(&[
            a("10.0.0.1", 26379),
            a("10.0.0.1", 26379),
            a("10.0.0.2", 26379),
        ]);
        assert_eq!(list.entries().len(), 2);
    }

    #[test]
    fn a_name_and_its_ip_are_one_sentinel_and_the_name_is_kept() {
        let mut list = SentinelList::new(&[a("sentinel-1.svc", 26379), a("sentinel-2.svc", 26379)]);
        // Learned before the names resolved: appended for now.
        assert!(list.learn(a("10.0.0.1", 26379), Some("r1".into()), false));
        assert_eq!(list.entries().len(), 3);
        let id = list.entries()[0].id;
        list.set_resolved(id, vec![sa("10.0.0.1:26379")]);
        assert_eq!(list.entries().len(), 2);
        assert_eq!(list.entries()[0].address, a("sentinel-1.svc", 26379));
        assert_eq!(list.entries()[0].run_id.as_deref(), Some("r1"));
        // Learned after resolution: recognised at once.
        let id2 = list.entries()[1].id;
        list.set_resolved(id2, vec![sa("10.0.0.2:26379")]);
        assert!(!list.learn(a("10.0.0.2", 26379), Some("r2".into()), false));
        assert_eq!(list.entries().len(), 2);
    }

    #[test]
    fn a_named_seed_wins_over_an_ip_seed_of_the_same_sentinel() {
        let mut list = SentinelList::new(&[a("127.0.0.1", 26379), a("localhost", 26379)]);
        assert_eq!(list.entries().len(), 2);
        let id = list.entries()[1].id;
        list.set_resolved(id, vec![sa("127.0.0.1:26379")]);
        assert_eq!(list.entries().len(), 1);
        assert_eq!(list.entries()[0].address, a("localhost", 26379));
    }

    #[test]
    fn run_ids_merge_entries_reported_under_other_addresses() {
        let mut list = SentinelList::new(&[a("10.0.0.1", 26379)]);
        assert!(list.learn(a("192.168.0.1", 26379), Some("abc".into()), false));
        let id = list.entries()[0].id;
        list.set_run_id(id, "abc".into());
        assert_eq!(list.entries().len(), 1);
        assert!(list.entries()[0].seed);
        assert!(!list.learn(a("172.16.0.9", 26379), Some("abc".into()), false));
    }

    #[test]
    fn learned_sentinels_append_and_down_ones_are_asked_last() {
        let mut list = SentinelList::new(&[a("10.0.0.1", 26379)]);
        assert!(list.learn(a("10.0.0.2", 26379), None, true));
        assert!(list.learn(a("10.0.0.3", 26379), None, false));
        assert!(!list.learn(a("10.0.0.3", 26379), None, false));
        let order: Vec<String> = list
            .ask_order()
            .into_iter()
            .map(|id| list.get(id).unwrap().address.to_string())
            .collect();
        assert_eq!(
            order,
            ["10.0.0.1:26379", "10.0.0.3:26379", "10.0.0.2:26379"]
        );
        // A sentinel that answers us is no longer treated as down.
        let id = list.entries()[1].id;
        assert_eq!(list.set_up(id, true), Some(true));
        assert_eq!(list.set_up(id, true), None);
        assert!(!list.get(id).unwrap().reported_down);
        assert_eq!(list.infos().len(), 3);
    }
}
