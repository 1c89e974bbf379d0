//! Loopback ports for fixtures to listen on (or to find refused).

use std::net::{TcpListener, UdpSocket};

/// A loopback TCP port that was free a moment ago (bound with port 0, then released). The UDP port
/// of the same number was free too. Another process may take it before you bind it; fixtures
/// that start servers retry with a new port when that happens.
pub fn free_port() -> u16 {
    for _ in 0..50 {
        let Ok(l) = TcpListener::bind("127.0.0.1:0") else {
            continue;
        };
        let Ok(addr) = l.local_addr() else { continue };
        if UdpSocket::bind(("127.0.0.1", addr.port())).is_ok() {
            return addr.port();
        }
    }
    panic!("no free loopback port after 50 attempts")
}

/// A loopback port with nothing listening on it (bound, noted, released): connecting to it is
/// refused at once (unless some other process takes the port meanwhile).
pub fn refusing_port() -> u16 {
    free_port()
}
