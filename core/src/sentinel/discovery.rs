//! One discovery round: ask every known sentinel at once under one deadline, take the first valid
//! answer, verify it with `ROLE`, then read replicas and sentinels from the winning sentinel.
//!
//! "Valid" means `SENTINEL MASTER` shows the `master` flag and neither `s_down` nor `o_down`; an
//! answer flagged down counts like a null reply. A candidate that `ROLE` says is a replica means the
//! sentinel was stale: the next answer with another address is tried. The round never waits
//! longer than its deadline for sentinels, however many accept and never answer.
//!
//! Sentinels disagree during a failover: the leader flags the old master `failover_in_progress`
//! while it promotes a replica, and the others name the old master until they hear of the
//! switch. So among the answers at hand, an unflagged one beats a `failover_in_progress` one and
//! a higher config epoch beats a lower one; and a primary the monitor already saw replaced is
//! not taken back from a sentinel that has not caught up.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::{timeout_at, Instant};

use super::links::{self, Learned, Link};
use super::replies::{self, InstanceInfo};
use crate::config::{AddressMap, Config};
use crate::dns::Resolver;
use crate::error::{Error, ErrorCode, Result};
use crate::node::{self, Expect};
use crate::resp::{ConnectOptions, Connection};
use crate::types::Address;

/// What a round needs to know about one sentinel.
#[derive(Clone)]
pub struct SentinelTarget {
    /// Id in the sentinel list.
    pub id: u64,
    /// Address to resolve and connect to.
    pub address: Address,
    /// The open (shared) connection from an earlier round, if any.
    pub conn: Option<Arc<Link>>,
    /// Reported down by a peer: asked a little later than the others.
    pub reported_down: bool,
}

/// Settings of a round.
#[derive(Clone)]
pub struct RoundSettings {
    /// The service to look up.
    pub service: String,
    /// Handshake for sentinel connections (sentinel credentials).
    pub sentinel_connect: ConnectOptions,
    /// Handshake for data nodes (data credentials), used for ROLE verification.
    pub data_connect: ConnectOptions,
    /// Deadline for all sentinel answers.
    pub deadline: Duration,
    /// Resolver for sentinel and primary host names.
    pub resolver: Resolver,
    /// The sentinel-side settings ([`links::sentinel_side`]): monitors with equal ones share
    /// their sentinel connections.
    pub sentinel_side: Config,
    /// `address_map`, applied to every address a sentinel reports before anything connects to it.
    pub address_map: AddressMap,
}

/// What one sentinel answered.
#[derive(Debug)]
pub enum Answer {
    /// It reported this master entry (maybe flagged down).
    Master(InstanceInfo),
    /// It does not monitor the service.
    Unknown,
}

/// The outcome for one sentinel, for bookkeeping in the sentinel list.
pub struct SentinelOutcome {
    /// Id in the sentinel list.
    pub id: u64,
    /// Connection to keep for the next round (`None` when it failed or timed out).
    pub conn: Option<Arc<Link>>,
    /// Fresh resolution of the sentinel's address.
    pub resolved: Option<Vec<SocketAddr>>,
    /// Run id, learned from `SENTINEL MYID` on a new connection.
    pub run_id: Option<String>,
    /// TILT state, learned from `INFO sentinel` on a new connection, and when it was asked.
    pub tilt: Option<(bool, tokio::time::Instant)>,
    /// Its answer or why it could not give one.
    pub answer: Result<Answer>,
}

/// What the monitor already knows, for judging answers.
pub struct Known {
    /// The primary it follows and its open connection, reused for verification.
    pub current: Option<(Address, Connection)>,
    /// The config epoch of the current primary.
    pub epoch: u64,
    /// Primaries a failover replaced, with the config epoch they had: a sentinel that names one
    /// of them with no newer epoch (or flagged `failover_in_progress`) has not caught up.
    pub retired: Vec<(Address, u64)>,
}

impl Known {
    fn is_lagging(&self, info: &InstanceInfo) -> bool {
        self.retired.iter().any(|(address, epoch)| {
            info.address == *address
                && (info.config_epoch <= *epoch || info.flags.has("failover_in_progress"))
        })
    }
}

/// The verified result of a successful round.
pub struct Found {
    /// The sentinel whose answer won.
    pub sentinel_id: u64,
    /// The primary as that sentinel reported it, verified with ROLE.
    pub primary: InstanceInfo,
    /// Connection to the primary on which ROLE answered `master`.
    pub primary_conn: Connection,
    /// `SENTINEL REPLICAS` of the winning sentinel, if it answered in time.
    pub replicas: Option<Vec<InstanceInfo>>,
    /// `SENTINEL SENTINELS` of the winning sentinel, if it answered in time.
    pub sentinels: Option<Vec<InstanceInfo>>,
}

/// A finished round.
pub struct Round {
    /// One outcome per sentinel that answered (or failed) before the result was known.
    pub outcomes: Vec<SentinelOutcome>,
    /// The sentinels not heard from yet.
    pub stragglers: Stragglers,
    /// The verified primary, or the error that names which case happened.
    pub result: Result<Found>,
}

/// Runs one round. `known.current` is the monitor's open connection to the primary it follows,
/// reused for verification when a sentinel reports the same address.
pub async fn run(settings: &RoundSettings, targets: Vec<SentinelTarget>, known: Known) -> Round {
    let current = known.current.clone();
    let deadline = Instant::now() + settings.deadline;
    let mut pending: Vec<u64> = targets.iter().map(|t| t.id).collect();
    let mut tasks = JoinSet::new();
    let stagger = (settings.deadline / 4).min(Duration::from_millis(100));
    for target in targets {
        let settings = settings.clone();
        tasks.spawn(async move {
            if target.reported_down {
                tokio::time::sleep(stagger).await;
            }
            let id = target.id;
            match timeout_at(deadline, ask(&settings, target)).await {
                Ok(outcome) => outcome,
                Err(_) => SentinelOutcome {
                    id,
                    conn: None,
                    resolved: None,
                    run_id: None,
                    tilt: None,
                    answer: Err(Error::timeout("no answer before the sentinel deadline")),
                },
            }
        });
    }

    let mut outcomes: Vec<SentinelOutcome> = Vec::new();
    let mut rejected: Vec<(Address, Error)> = Vec::new();
    let mut lagging = false;
    let mut found = None;
    let mut more = true;
    while found.is_none() {
        // Wait for one more answer, then take every answer already in: the best candidate is
        // chosen among all answers at hand, not only the first.
        if more {
            match timeout_at(deadline, tasks.join_next()).await {
                Ok(Some(Ok(outcome))) => {
                    pending.retain(|id| *id != outcome.id);
                    outcomes.push(outcome);
                }
                Ok(Some(Err(_))) => continue,
                Ok(None) | Err(_) => more = false,
            }
            while let Some(joined) = tasks.try_join_next() {
                if let Ok(outcome) = joined {
                    pending.retain(|id| *id != outcome.id);
                    outcomes.push(outcome);
                }
            }
        }
        let Some((index, info)) = best_candidate(&outcomes, &rejected, &known, &mut lagging) else {
            if more {
                continue;
            }
            break;
        };
        // A failover in progress: wait for the others while any may still answer unflagged.
        if info.flags.has("failover_in_progress") && more && !pending.is_empty() {
            continue;
        }
        match verify(settings, &info, current.as_ref()).await {
            Ok(primary_conn) => {
                let outcome = &outcomes[index];
                let conn = outcome.conn.clone().expect("candidates have a connection");
                found = Some((outcome.id, info, primary_conn, conn));
            }
            Err(e) => {
                tracing::info!(service = %settings.service, candidate = %info.address, error = %e,
                    "candidate primary rejected");
                rejected.push((info.address.clone(), e));
            }
        }
    }
    // Every answer named a primary that a failover already replaced: the sentinels have not
    // caught up with the switch the monitor verified. Keep the current primary if it still
    // answers as one.
    if found.is_none() && lagging {
        if let Some((address, conn)) = current.as_ref() {
            let info = InstanceInfo {
                address: address.clone(),
                flags: replies::Flags::default().with("master"),
                run_id: None,
                config_epoch: known.epoch,
            };
            let winner = outcomes.iter().find(|o| o.conn.is_some());
            if let (Some(winner), Ok(primary_conn)) = (
                winner,
                verify(settings, &info, Some(&(address.clone(), conn.clone()))).await,
            ) {
                tracing::debug!(service = %settings.service, primary = %address,
                    "sentinels still name the replaced primary; keeping the verified one");
                return Round {
                    result: Ok(Found {
                        sentinel_id: winner.id,
                        primary: info,
                        primary_conn,
                        replicas: None,
                        sentinels: None,
                    }),
                    outcomes,
                    stragglers: Stragglers {
                        tasks,
                        pending,
                        deadline,
                    },
                };
            }
        }
    }

    let result = match found {
        Some((sentinel_id, primary, primary_conn, sentinel_conn)) => {
            let (replicas, sentinels) = details(settings, &sentinel_conn, deadline).await;
            Ok(Found {
                sentinel_id,
                primary,
                primary_conn,
                replicas,
                sentinels,
            })
        }
        None => Err(classify(&settings.service, &outcomes, &rejected)),
    };
    Round {
        outcomes,
        stragglers: Stragglers {
            tasks,
            pending,
            deadline,
        },
        result,
    }
}

/// Asks every target for the service's master entry at once, each within `deadline`, and
/// returns every outcome and the ids that did not answer in time: what the sentinel-majority
/// fence needs to know (who still hears us and which primary they name), without verifying
/// anything. One `SENTINEL MASTER` per sentinel on its shared connection.
pub async fn ask_each(
    settings: &RoundSettings,
    targets: Vec<SentinelTarget>,
    deadline: Duration,
) -> (Vec<SentinelOutcome>, Vec<u64>) {
    let deadline = Instant::now() + deadline;
    let mut tasks = JoinSet::new();
    let mut pending: Vec<u64> = targets.iter().map(|t| t.id).collect();
    for target in targets {
        let settings = settings.clone();
        tasks.spawn(async move { timeout_at(deadline, ask(&settings, target)).await });
    }
    let mut outcomes = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        if let Ok(Ok(outcome)) = joined {
            pending.retain(|id| *id != outcome.id);
            outcomes.push(outcome);
        }
    }
    (outcomes, pending)
}

/// Sentinels still being asked when the round's result was known. Waiting for them is left to
/// the caller, after it has published the result, so a sentinel that accepts and never answers
/// delays nothing but its own bookkeeping.
pub struct Stragglers {
    tasks: JoinSet<SentinelOutcome>,
    pending: Vec<u64>,
    deadline: Instant,
}

impl Stragglers {
    /// The outcomes that have already arrived, without waiting.
    pub fn take_finished(&mut self) -> Vec<SentinelOutcome> {
        let mut outcomes = Vec::new();
        while let Some(joined) = self.tasks.try_join_next() {
            if let Ok(outcome) = joined {
                self.pending.retain(|id| *id != outcome.id);
                outcomes.push(outcome);
            }
        }
        outcomes
    }

    /// Waits until the round's deadline at the latest; returns the outcomes that arrived and the
    /// ids of the sentinels that did not answer in time (their requests are abandoned).
    pub async fn finish(mut self) -> (Vec<SentinelOutcome>, Vec<u64>) {
        let mut outcomes = Vec::new();
        while let Ok(Some(joined)) = timeout_at(self.deadline, self.tasks.join_next()).await {
            if let Ok(outcome) = joined {
                self.pending.retain(|id| *id != outcome.id);
                outcomes.push(outcome);
            }
        }
        self.tasks.abort_all();
        (outcomes, self.pending)
    }
}

/// The most credible answer not tried yet: unflagged before `failover_in_progress`, then the
/// highest config epoch. Answers naming a replaced primary are skipped (and noted in `lagging`).
fn best_candidate(
    outcomes: &[SentinelOutcome],
    rejected: &[(Address, Error)],
    known: &Known,
    lagging: &mut bool,
) -> Option<(usize, InstanceInfo)> {
    outcomes
        .iter()
        .enumerate()
        .filter_map(|(i, o)| match (&o.answer, &o.conn) {
            (Ok(Answer::Master(info)), Some(_)) => Some((i, info)),
            _ => None,
        })
        // Flagged down or not: a sentinel naming the replaced primary has not caught up.
        .filter(|(_, info)| {
            let lags = known.is_lagging(info);
            *lagging |= lags;
            !lags
        })
        .filter(|(_, info)| is_valid(info))
        .filter(|(_, info)| !rejected.iter().any(|(a, _)| *a == info.address))
        .min_by_key(|(_, info)| {
            (
                info.flags.has("failover_in_progress"),
                std::cmp::Reverse(info.config_epoch),
            )
        })
        .map(|(i, info)| (i, info.clone()))
}

/// A master entry the client may follow: flagged master, not subjectively or objectively down.
pub fn is_valid(info: &InstanceInfo) -> bool {
    info.flags.has("master") && !info.flags.is_down()
}

async fn ask(settings: &RoundSettings, target: SentinelTarget) -> SentinelOutcome {
    let mut outcome = SentinelOutcome {
        id: target.id,
        conn: None,
        resolved: None,
        run_id: None,
        tilt: None,
        answer: Err(Error::new(ErrorCode::SentinelsUnreachable, "not asked")),
    };
    let conn = match target.conn.filter(|c| !c.is_closed()) {
        Some(conn) => conn,
        None => {
            let key = (target.address.clone(), settings.sentinel_side.clone());
            match links::get(&key, || open_link(settings, &target.address)).await {
                Ok(link) => {
                    let learned = link.learned().clone();
                    outcome.resolved = Some(learned.resolved);
                    outcome.run_id = learned.run_id;
                    outcome.tilt = learned.tilt;
                    link
                }
                Err(e) => {
                    outcome.answer = Err(e.context(format!("sentinel {}", target.address)));
                    return outcome;
                }
            }
        }
    };
    outcome.answer = query_master(&conn, &settings.service)
        .await
        .map(|answer| match answer {
            Answer::Master(info) => Answer::Master(mapped(&settings.address_map, info)),
            unknown => unknown,
        })
        .map_err(|e| e.context(format!("sentinel {}", target.address)));
    // A connection that produced garbage or broke is not reused.
    if !matches!(&outcome.answer, Err(e) if e.code() != ErrorCode::Server) && !conn.is_closed() {
        outcome.conn = Some(conn);
    } else {
        conn.close();
    }
    outcome
}

/// Opens a sentinel connection and learns what the sentinel list needs from a new one.
async fn open_link(settings: &RoundSettings, address: &Address) -> Result<(Connection, Learned)> {
    let (conn, resolved) =
        node::connect(&settings.resolver, address, &settings.sentinel_connect).await?;
    let mut learned = Learned {
        resolved,
        ..Learned::default()
    };
    // The run id lets the sentinel list merge this entry with the same sentinel reported under
    // another address; older sentinels without MYID just stay unmerged.
    if let Ok(v) = conn.request(&["SENTINEL", "MYID"]).await {
        learned.run_id = v.as_str().map(String::from);
    }
    // A sentinel in TILT answers, but from a view that may be stale; events keep this up to
    // date while the connection lasts.
    let asked = Instant::now();
    if let Ok(v) = conn.request(&["INFO", "sentinel"]).await {
        learned.tilt = v.as_str().and_then(replies::info_tilt).map(|t| (t, asked));
    }
    Ok((conn, learned))
}

/// The instance with its address as the client reaches it (`address_map`), the reported one kept
/// in [`Address::announced`].
fn mapped(map: &AddressMap, mut info: InstanceInfo) -> InstanceInfo {
    info.address = map.apply(&info.address);
    info
}

async fn query_master(conn: &Connection, service: &str) -> Result<Answer> {
    match conn.request(&["SENTINEL", "MASTER", service]).await {
        Ok(v) => replies::master(v).map(Answer::Master),
        Err(e) if e.code() == ErrorCode::Server && e.message().contains("No such master") => {
            Ok(Answer::Unknown)
        }
        Err(e) if e.code() == ErrorCode::Server => {
            // MASTER refused (ACL, renamed command): the spec's GET-MASTER-ADDR-BY-NAME carries
            // no flags, so the ROLE check is all that guards this answer.
            tracing::debug!(error = %e, "SENTINEL MASTER refused, falling back to GET-MASTER-ADDR-BY-NAME");
            let v = conn
                .request(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", service])
                .await?;
            Ok(match replies::master_addr(v)? {
                None => Answer::Unknown,
                Some(address) => Answer::Master(InstanceInfo {
                    address,
                    flags: replies::Flags::default().with("master"),
                    run_id: None,
                    config_epoch: 0,
                }),
            })
        }
        Err(e) => Err(e),
    }
}

/// ROLE check of a candidate primary. Reuses the monitor's connection when it points there.
async fn verify(
    settings: &RoundSettings,
    info: &InstanceInfo,
    current: Option<&(Address, Connection)>,
) -> Result<Connection> {
    let reusable = current
        .filter(|(a, c)| *a == info.address && !c.is_closed())
        .map(|(_, c)| c.clone());
    let conn = match reusable {
        Some(conn) => conn,
        None => {
            node::connect(&settings.resolver, &info.address, &settings.data_connect)
                .await?
                .0
        }
    };
    let timeout = settings.data_connect.connect_timeout;
    node::verify_role(&conn, &info.address, Expect::Primary, timeout).await?;
    Ok(conn)
}

async fn details(
    settings: &RoundSettings,
    conn: &Connection,
    deadline: Instant,
) -> (Option<Vec<InstanceInfo>>, Option<Vec<InstanceInfo>>) {
    // The winner answered moments ago; give these follow-ups at least one full deadline even if
    // verification used up the round's.
    let deadline = deadline.max(Instant::now() + settings.deadline);
    let list = |cmd: &'static str| async move {
        let reply = timeout_at(
            deadline,
            conn.request(&["SENTINEL", cmd, settings.service.as_str()]),
        )
        .await;
        match reply {
            Ok(Ok(v)) => replies::instances(v, cmd).ok().map(|list| {
                list.into_iter()
                    .map(|info| mapped(&settings.address_map, info))
                    .collect()
            }),
            Ok(Err(e)) => {
                tracing::debug!(error = %e, cmd, "sentinel list query failed");
                None
            }
            Err(_) => None,
        }
    };
    tokio::join!(list("REPLICAS"), list("SENTINELS"))
}

fn classify(service: &str, outcomes: &[SentinelOutcome], rejected: &[(Address, Error)]) -> Error {
    let reachable: Vec<&Answer> = outcomes
        .iter()
        .filter_map(|o| o.answer.as_ref().ok())
        .collect();
    if reachable.is_empty() {
        let reasons: Vec<String> = outcomes
            .iter()
            .filter_map(|o| o.answer.as_ref().err().map(|e| e.message().to_string()))
            .collect();
        let code = shared_code(outcomes.iter().filter_map(|o| o.answer.as_ref().err()))
            .unwrap_or(ErrorCode::SentinelsUnreachable);
        return Error::new(
            code,
            format!(
                "no sentinel could be reached for service '{service}' ({})",
                join_or_none(&reasons)
            ),
        );
    }
    if reachable.iter().all(|a| matches!(a, Answer::Unknown)) {
        return Error::new(
            ErrorCode::ServiceUnknown,
            format!("no sentinel knows service '{service}'"),
        );
    }
    let mut reasons: Vec<String> = reachable
        .iter()
        .filter_map(|a| match a {
            Answer::Master(info) if !is_valid(info) => {
                Some(format!("{} flagged {}", info.address, info.flags))
            }
            _ => None,
        })
        .collect();
    // Only when no sentinel flagged its master down: then every candidate failed the same way.
    let code = if reasons.is_empty() {
        shared_code(rejected.iter().map(|(_, e)| e))
    } else {
        None
    };
    reasons.extend(rejected.iter().map(|(_, e)| e.message().to_string()));
    let mut seen = std::collections::HashSet::new();
    reasons.retain(|r| seen.insert(r.clone()));
    let unreachable: Vec<&Address> = rejected
        .iter()
        .filter(|(_, e)| matches!(e.code(), ErrorCode::ConnectionLost | ErrorCode::Timeout))
        .map(|(a, _)| a)
        .collect();
    let unreachable_text;
    let what = match code {
        Some(ErrorCode::Auth) => {
            "the primary the sentinels report refused the data-node credentials"
        }
        Some(_) => "TLS with the primary the sentinels report failed",
        // The sentinels agree on a healthy primary; this client just cannot reach it (NAT,
        // firewall, an announced address that only works inside the servers' network).
        None if !unreachable.is_empty() && unreachable.len() == rejected.len() => {
            let names: Vec<String> = unreachable.iter().map(|a| a.to_string()).collect();
            unreachable_text = format!(
                "primary {} reported healthy by the sentinels but unreachable from here",
                names.join(", ")
            );
            unreachable_text.as_str()
        }
        None => "sentinels report no healthy primary",
    };
    Error::new(
        code.unwrap_or(ErrorCode::NoHealthyPrimary),
        format!("{what} for '{service}' ({})", join_or_none(&reasons)),
    )
}

/// The code all `errors` share when it is one retrying cannot fix (refused credentials, failed TLS
/// verification), so the user sees `auth` or `tls` instead of a generic summary.
fn shared_code<'a>(errors: impl IntoIterator<Item = &'a Error>) -> Option<ErrorCode> {
    let mut codes = errors.into_iter().map(Error::code);
    let first = codes.next()?;
    (matches!(first, ErrorCode::Auth | ErrorCode::Tls) && codes.all(|c| c == first))
        .then_some(first)
}

fn join_or_none(reasons: &[String]) -> String {
    if reasons.is_empty() {
        "no details".to_string()
    } else {
        reasons.join("; ")
    }
}
