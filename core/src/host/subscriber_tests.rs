//! The host layer's guarantees for pub/sub subscriptions, on subscriptions fed by the test (the
//! real-server path is in tests/tests/pubsub.rs).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::inflight::Registry;
use super::{Handle, Subscriber};
use crate::client::Subscription;
use crate::error::ErrorCode;
use crate::types::Message;

fn message(channel: &str, n: usize) -> Message {
    Message {
        channel: Bytes::copy_from_slice(channel.as_bytes()),
        pattern: None,
        payload: Bytes::from(n.to_string()),
    }
}

/// A subscriber on channels `a` and `b` and the sender that feeds it, as a node would.
fn fed_subscriber() -> (Subscriber, tokio::sync::mpsc::Sender<Message>) {
    let _runtime = crate::runtime::handle().unwrap();
    let (subscription, feed) = Subscription::detached(&["a", "b"], 100_000);
    (
        Subscriber::new(Arc::new(Registry::default()), subscription),
        feed,
    )
}

/// Feeds `channel` messages numbered from 0 on a thread of its own until `stop` is set.
fn feed_until(
    feed: tokio::sync::mpsc::Sender<Message>,
    channel: &'static str,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let mut n = 0;
        while !stop.load(Ordering::SeqCst) {
            if feed.try_send(message(channel, n)).is_ok() {
                n += 1;
            }
            std::thread::yield_now();
        }
        n
    })
}

#[test]
fn the_handler_gets_messages_in_order_and_none_after_close_returns() {
    let (subscriber, feed) = fed_subscriber();
    let calls = Arc::new(AtomicUsize::new(0));
    let in_call = Arc::new(AtomicBool::new(false));
    let out_of_order = Arc::new(AtomicBool::new(false));
    let (first_tx, first) = mpsc::channel();
    {
        let (calls, in_call, out_of_order) = (calls.clone(), in_call.clone(), out_of_order.clone());
        subscriber
            .on_message(Box::new(move |m| {
                in_call.store(true, Ordering::SeqCst);
                let n: usize = std::str::from_utf8(&m.payload).unwrap().parse().unwrap();
                if n != calls.load(Ordering::SeqCst) {
                    out_of_order.store(true, Ordering::SeqCst);
                }
                calls.fetch_add(1, Ordering::SeqCst);
                let _ = first_tx.send(());
                std::thread::sleep(Duration::from_micros(200));
                in_call.store(false, Ordering::SeqCst);
            }))
            .unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = feed_until(feed, "a", stop.clone());
    first.recv_timeout(Duration::from_secs(10)).unwrap();
    subscriber.close();
    assert!(
        !in_call.load(Ordering::SeqCst),
        "a call ran after close returned"
    );
    let at_close = calls.load(Ordering::SeqCst);
    // Keep feeding for a while: nothing more may arrive.
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::SeqCst);
    let sent = feeder.join().unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), at_close);
    assert!(sent > at_close, "the feeder kept sending after close");
    assert!(!out_of_order.load(Ordering::SeqCst));
    assert!(subscriber.is_closed());
}

#[test]
fn closing_from_inside_the_handler_ends_the_calls() {
    let (subscriber, feed) = fed_subscriber();
    let calls = Arc::new(AtomicUsize::new(0));
    let (closed_tx, closed) = mpsc::channel();
    {
        let calls = calls.clone();
        let me = subscriber.clone();
        subscriber
            .on_message(Box::new(move |_| {
                calls.fetch_add(1, Ordering::SeqCst);
                me.close();
                let _ = closed_tx.send(());
            }))
            .unwrap();
    }
    for n in 0..100 {
        feed.try_send(message("a", n)).unwrap();
    }
    closed.recv_timeout(Duration::from_secs(10)).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[test]
fn once_unsubscribe_completes_no_message_of_that_channel_reaches_the_handler() {
    let (subscriber, feed) = fed_subscriber();
    let seen = Arc::new(std::sync::Mutex::new(Vec::<(String, bool)>::new()));
    let unsubscribed = Arc::new(AtomicBool::new(false));
    {
        let (seen, unsubscribed) = (seen.clone(), unsubscribed.clone());
        subscriber
            .on_message(Box::new(move |m| {
                let channel = String::from_utf8(m.channel.to_vec()).unwrap();
                seen.lock()
                    .unwrap()
                    .push((channel, unsubscribed.load(Ordering::SeqCst)));
            }))
            .unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let feeder_a = feed_until(feed.clone(), "a", stop.clone());
    let feeder_b = feed_until(feed, "b", stop.clone());
    std::thread::sleep(Duration::from_millis(50));
    Handle::block(|done| subscriber.unsubscribe(&["a"], done)).unwrap();
    unsubscribed.store(true, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::SeqCst);
    feeder_a.join().unwrap();
    feeder_b.join().unwrap();
    subscriber.close();
    let seen = seen.lock().unwrap();
    assert!(seen.iter().any(|(c, after)| c == "a" && !after));
    assert!(
        seen.iter().any(|(c, after)| c == "b" && *after),
        "b goes on"
    );
    assert!(
        !seen.iter().any(|(c, after)| c == "a" && *after),
        "a message of an unsubscribed channel was delivered"
    );
    assert_eq!(subscriber.channels(), vec![b"b".to_vec()]);
}

#[test]
fn next_returns_messages_in_order_then_none_after_close() {
    let (subscriber, feed) = fed_subscriber();
    for n in 0..3 {
        feed.try_send(message("b", n)).unwrap();
    }
    for n in 0..3 {
        let m = subscriber.next_blocking().unwrap().unwrap();
        assert_eq!(m.payload, n.to_string());
    }
    let (tx, rx) = mpsc::channel();
    subscriber.next(Box::new(move |r| {
        let _ = tx.send(r);
    }));
    subscriber.close();
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(10)).unwrap().unwrap(),
        None
    );
    assert_eq!(subscriber.next_blocking().unwrap(), None);
    // A change on a closed subscription fails with `closed`.
    let e = Handle::block(|done| subscriber.subscribe(&["c"], done)).unwrap_err();
    assert_eq!(e.code(), ErrorCode::Closed);
}

#[test]
fn closing_the_handle_ends_its_subscriptions_before_it_returns() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let handle =
        Handle::open_url::<&str, &str>(&format!("redis+sentinel://127.0.0.1:{port}/m"), &[])
            .unwrap();
    let (subscription, feed) = Subscription::detached(&["a"], 100_000);
    let subscriber = handle.adopt(subscription);
    let calls = Arc::new(AtomicUsize::new(0));
    let (first_tx, first) = mpsc::channel();
    {
        let calls = calls.clone();
        subscriber
            .on_message(Box::new(move |_| {
                calls.fetch_add(1, Ordering::SeqCst);
                let _ = first_tx.send(());
            }))
            .unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = feed_until(feed, "a", stop.clone());
    first.recv_timeout(Duration::from_secs(10)).unwrap();
    // A pull waiting when the handle closes ends with `None`, not an error.
    let (pulled_tx, pulled) = mpsc::channel();
    let (other, _feed) = Subscription::detached(&["b"], 10);
    let puller = handle.adopt(other);
    puller.next(Box::new(move |r| {
        let _ = pulled_tx.send(r);
    }));
    handle.close_blocking();
    let at_close = calls.load(Ordering::SeqCst);
    assert!(subscriber.is_closed());
    assert_eq!(
        pulled
            .recv_timeout(Duration::from_secs(10))
            .unwrap()
            .unwrap(),
        None
    );
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::SeqCst);
    feeder.join().unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), at_close);
    // Subscribing on a closed handle completes with `closed`.
    let e = Handle::block(|done| handle.subscribe(&["a"], &[], None, done)).unwrap_err();
    assert_eq!(e.code(), ErrorCode::Closed);
}

#[test]
fn a_subscription_needs_a_name_and_a_buffer() {
    let handle = Handle::open_url::<&str, &str>("redis+sentinel://127.0.0.1:1/m", &[]).unwrap();
    let none: [&str; 0] = [];
    let e = Handle::block(|done| handle.subscribe(&none, &none, None, done)).unwrap_err();
    assert_eq!(e.code(), ErrorCode::Config);
    let e = Handle::block(|done| handle.subscribe(&["a"], &none, Some(0), done)).unwrap_err();
    assert_eq!(e.code(), ErrorCode::Config);
    handle.close_blocking();
}
