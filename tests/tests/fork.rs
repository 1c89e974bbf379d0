//! A client opened before `fork()` works in the child (gunicorn `--preload`, Celery prefork): the
//! child's first command re-creates what the parent's threads owned, a new client in the child
//! starts from nothing of the parent's, and the parent is not disturbed. One test per binary: the forked child must not share the harness with other tests.

mod common;

use std::time::{Duration, Instant};

use common::*;
use sentinel_recovery::Client;
use sentinel_recovery_testkit::{Topology, TopologySpec};

/// Waits for `pid` to exit, at most `timeout`; returns its exit code, or kills it and panics.
fn wait_child(pid: libc::pid_t, timeout: Duration) -> i32 {
    let deadline = Instant::now() + timeout;
    loop {
        let mut status = 0;
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            assert!(libc::WIFEXITED(status), "child ended by a signal: {status}");
            return libc::WEXITSTATUS(status);
        }
        if Instant::now() > deadline {
            unsafe { libc::kill(pid, libc::SIGKILL) };
            unsafe { libc::waitpid(pid, &mut status, 0) };
            panic!("forked child still running after {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_client_inherited_across_fork_works_in_the_child_and_the_parent() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    let url = url_with(&topo.url(), "command_timeout_ms=5000");
    let client = rt().block_on(Client::connect(&url)).unwrap();
    client
        .execute_blocking(&["SET", "fork:parent", "1"])
        .unwrap();

    let mut children = Vec::new();
    for worker in 0..3 {
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            // Child: the inherited client, then (the last worker) one of its own with the same
            // URL, which must not pick up what the parent's threads owned (shared sentinel
            // links, subscriptions). Exit codes tell the parent what broke.
            let key = format!("fork:child:{worker}");
            let mut code = match client.execute_blocking(&["SET", key.as_str(), "x"]) {
                Ok(_) => match client.execute_blocking(&["GET", "fork:parent"]) {
                    Ok(v) if v.as_bytes() == Some(b"1".as_slice()) => 0,
                    Ok(_) => 3,
                    Err(_) => 2,
                },
                Err(_) => 1,
            };
            if code == 0 && worker == 2 {
                code = match Client::open_url(&url)
                    .and_then(|own| own.execute_blocking(&["GET", "fork:parent"]))
                {
                    Ok(v) if v.as_bytes() == Some(b"1".as_slice()) => 0,
                    _ => 4,
                };
            }
            unsafe { libc::_exit(code) };
        }
        children.push(pid);
    }
    for pid in children {
        assert_eq!(
            wait_child(pid, Duration::from_secs(20)),
            0,
            "child {pid} could not use the inherited client"
        );
    }
    for worker in 0..3 {
        let key = format!("fork:child:{worker}");
        let v = client.execute_blocking(&["GET", key.as_str()]).unwrap();
        assert_eq!(
            v.as_bytes(),
            Some(b"x".as_slice()),
            "written by child {worker}"
        );
    }
    rt().block_on(client.close());
}
