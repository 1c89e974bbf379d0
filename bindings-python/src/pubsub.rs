//! `NativeSubscriber`: a pub/sub subscription of the core's host layer as the Python layer sees
//! it (`sentinel_recovery.AsyncSubscription` and `Subscription` wrap it).
//!
//! Messages are pulled one at a time: `next_async` returns an awaitable like every other
//! operation, `next_blocking` waits with the GIL released (signals handled). The guarantees
//! (order, at-most-once, nothing after close, the bounded buffer and its dropped count) are the
//! core's.

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use sentinel_recovery::host::Subscriber;
use sentinel_recovery::{Message, Value};

use crate::call::{call, Mode};
use crate::client::NativeClient;
use crate::convert;

/// A pub/sub subscription. Not meant to be used directly: see `sentinel_recovery.Client.subscribe`.
#[pyclass(frozen, module = "sentinel_recovery._native")]
pub struct NativeSubscriber {
    subscriber: Subscriber,
    decode: bool,
}

/// A message as `(channel, data, pattern)`, or `None` once the subscription ended; strings are
/// `bytes`, or `str` with `decode_responses=True`.
fn message_to_py(
    py: Python<'_>,
    message: Option<Message>,
    decode: bool,
) -> PyResult<Bound<'_, PyAny>> {
    let Some(m) = message else {
        return Ok(py.None().into_bound(py));
    };
    let text = |b| convert::value(py, Value::Bulk(b), decode);
    let pattern = match m.pattern {
        Some(p) => text(p)?,
        None => py.None().into_bound(py),
    };
    Ok(PyTuple::new(py, [text(m.channel)?, text(m.payload)?, pattern])?.into_any())
}

fn command(change: &str) -> PyResult<&'static str> {
    match change {
        "subscribe" => Ok("SUBSCRIBE"),
        "psubscribe" => Ok("PSUBSCRIBE"),
        "unsubscribe" => Ok("UNSUBSCRIBE"),
        "punsubscribe" => Ok("PUNSUBSCRIBE"),
        other => Err(pyo3::exceptions::PyValueError::new_err(format!(
            "unknown subscription change {other:?}"
        ))),
    }
}

impl NativeSubscriber {
    fn open(
        py: Python<'_>,
        mode: Mode,
        client: &NativeClient,
        channels: Vec<Vec<u8>>,
        patterns: Vec<Vec<u8>>,
        buffer: Option<usize>,
    ) -> PyResult<Py<PyAny>> {
        let decode = client.decode;
        call(
            py,
            mode,
            move |py, subscriber| {
                Ok(Bound::new(py, NativeSubscriber { subscriber, decode })?
                    .into_any()
                    .unbind())
            },
            |done| client.handle.subscribe(&channels, &patterns, buffer, done),
        )
    }

    fn next(&self, py: Python<'_>, mode: Mode) -> PyResult<Py<PyAny>> {
        let decode = self.decode;
        call(
            py,
            mode,
            move |py, m| Ok(message_to_py(py, m, decode)?.unbind()),
            |done| self.subscriber.next(done),
        )
    }

    /// `change` (as [`command`] checks it) of `names`.
    fn change(
        &self,
        py: Python<'_>,
        mode: Mode,
        change: &str,
        names: Vec<Vec<u8>>,
    ) -> PyResult<Py<PyAny>> {
        let command = command(change)?;
        let s = &self.subscriber;
        call(
            py,
            mode,
            |py, ()| Ok(py.None()),
            |done| match command {
                "SUBSCRIBE" => s.subscribe(&names, done),
                "PSUBSCRIBE" => s.psubscribe(&names, done),
                "UNSUBSCRIBE" => s.unsubscribe(&names, done),
                _ => s.punsubscribe(&names, done),
            },
        )
    }
}

#[pymethods]
impl NativeSubscriber {
    /// Subscribes on `client`; awaited for the subscription once the node confirmed it, or the
    /// exception. `buffer`: messages that may wait (default 4096).
    #[staticmethod]
    #[pyo3(signature = (client, channels, patterns, buffer=None))]
    fn open_async(
        py: Python<'_>,
        client: &NativeClient,
        channels: Vec<Vec<u8>>,
        patterns: Vec<Vec<u8>>,
        buffer: Option<usize>,
    ) -> PyResult<Py<PyAny>> {
        Self::open(py, Mode::Await, client, channels, patterns, buffer)
    }

    /// Subscribes on `client` and waits (GIL released, signals handled) for the confirmation.
    #[staticmethod]
    #[pyo3(signature = (client, channels, patterns, buffer=None))]
    fn open_blocking(
        py: Python<'_>,
        client: &NativeClient,
        channels: Vec<Vec<u8>>,
        patterns: Vec<Vec<u8>>,
        buffer: Option<usize>,
    ) -> PyResult<Py<PyAny>> {
        Self::open(py, Mode::Block, client, channels, patterns, buffer)
    }

    /// Awaited for the next message `(channel, data, pattern)`, or `None` once the subscription
    /// ended.
    fn next_async(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.next(py, Mode::Await)
    }

    /// The next message `(channel, data, pattern)`, waiting with the GIL released; `None` once
    /// the subscription ended.
    fn next_blocking(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.next(py, Mode::Block)
    }

    /// Starts `change` (`"subscribe"`, `"psubscribe"`, `"unsubscribe"`, `"punsubscribe"`) of
    /// `names`; awaited for `None` once the node confirmed it.
    fn change_async(
        &self,
        py: Python<'_>,
        change: &str,
        names: Vec<Vec<u8>>,
    ) -> PyResult<Py<PyAny>> {
        self.change(py, Mode::Await, change, names)
    }

    /// `change_async` that waits with the GIL released.
    fn change_blocking(
        &self,
        py: Python<'_>,
        change: &str,
        names: Vec<Vec<u8>>,
    ) -> PyResult<Py<PyAny>> {
        self.change(py, Mode::Block, change, names)
    }

    /// Ends the subscription: pending and later `next` calls give `None`. Idempotent.
    fn close(&self) {
        self.subscriber.close();
    }

    /// Whether the subscription ended (closed, or its client closed).
    #[getter]
    fn closed(&self) -> bool {
        self.subscriber.is_closed()
    }

    /// Messages dropped because the buffer was full (the newest are dropped).
    #[getter]
    fn dropped(&self) -> u64 {
        self.subscriber.dropped()
    }

    /// The channels subscribed now.
    #[getter]
    fn channels(&self, py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
        self.names(py, self.subscriber.channels())
    }

    /// The patterns subscribed now.
    #[getter]
    fn patterns(&self, py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
        self.names(py, self.subscriber.patterns())
    }
}

impl NativeSubscriber {
    fn names(&self, py: Python<'_>, names: Vec<Vec<u8>>) -> PyResult<Vec<Py<PyAny>>> {
        names
            .into_iter()
            .map(|n| Ok(convert::value(py, Value::Bulk(n.into()), self.decode)?.unbind()))
            .collect()
    }
}
