//! What durable acknowledgements cost per write on loopback: sequential SETs, and SETs with 64
//! in flight, through one client with `wait_replicas` off, 1 and 2, rounds interleaved so the
//! machine's drift falls on every variant alike; medians over the rounds.
//!
//! `cargo run --release -p sentinel-recovery-testkit --example durable_cost [ROUNDS] [WRITES]`
//! (a real primary, two replicas and three sentinels are started and stopped by the testkit).

use std::time::{Duration, Instant};

use sentinel_recovery::Client;
use sentinel_recovery_testkit::{Topology, TopologySpec};

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}

async fn sequential(client: &Client, writes: usize) -> f64 {
    let start = Instant::now();
    for i in 0..writes {
        client
            .execute(&["SET", &format!("cost:{i}"), "0123456789abcdef"])
            .await
            .unwrap();
    }
    start.elapsed().as_secs_f64() * 1e6 / writes as f64
}

async fn in_flight(client: &Client, writes: usize) -> f64 {
    let start = Instant::now();
    let per_task = writes / 64;
    let tasks: Vec<_> = (0..64)
        .map(|t| {
            let client = client.clone();
            tokio::spawn(async move {
                for i in 0..per_task {
                    client
                        .execute(&["SET", &format!("cost:{t}:{i}"), "0123456789abcdef"])
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    (per_task * 64) as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(7, |a| a.parse().unwrap());
    let writes: usize = args.next().map_or(5000, |a| a.parse().unwrap());
    let topo = Topology::start(TopologySpec::default()).unwrap();
    topo.wait_replication(Duration::from_secs(10)).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let variants = ["", "wait_replicas=1", "wait_replicas=2"];
        let mut clients = Vec::new();
        for query in variants {
            let url = if query.is_empty() {
                topo.url()
            } else {
                format!("{}?{query}", topo.url())
            };
            let client = Client::connect(&url).await.unwrap();
            // Warm up: connection, command table.
            sequential(&client, 200).await;
            clients.push(client);
        }
        let mut seq = vec![Vec::new(); variants.len()];
        let mut par = vec![Vec::new(); variants.len()];
        for _ in 0..rounds {
            for (i, client) in clients.iter().enumerate() {
                seq[i].push(sequential(client, writes).await);
                par[i].push(in_flight(client, writes * 4).await);
            }
        }
        println!("rounds {rounds}, {writes} sequential SETs and {} SETs at 64 in flight per round and variant", writes * 4);
        println!("| variant | sequential µs per SET (median; min–max) | 64 in flight SETs/s (median; min–max) |");
        println!("|---|---|---|");
        for (i, name) in variants.iter().enumerate() {
            let lo = |v: &Vec<f64>| v.iter().cloned().fold(f64::MAX, f64::min);
            let hi = |v: &Vec<f64>| v.iter().cloned().fold(0.0, f64::max);
            println!(
                "| {} | {:.1} ({:.1}–{:.1}) | {:.0} ({:.0}–{:.0}) |",
                if name.is_empty() { "off" } else { name },
                median(seq[i].clone()),
                lo(&seq[i]),
                hi(&seq[i]),
                median(par[i].clone()),
                lo(&par[i]),
                hi(&par[i]),
            );
        }
        for client in clients {
            client.close().await;
        }
    });
}
