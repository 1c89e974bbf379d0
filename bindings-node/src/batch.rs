//! What waits for the JavaScript thread ([`Item`]) and the typed batch it reaches JavaScript in:
//! one shape for every completion and event, from the wake function and from a reply read on the
//! JavaScript thread alike.
//!
//! JavaScript is called with `(columns, count, first, rest)`: `count` items, item 0's value
//! `first` and the others' in the array `rest` (`undefined` for a batch of one, the sequential
//! case, which then makes no array: filling one costs napi more than the rest of the batch). In
//! `columns` (four typed arrays over one ArrayBuffer) item `i` has its kind `kinds[i]`
//! ([`BatchKind`]), its operation `ids[i]` (0 for an event) and, for [`BatchKind::Bytes`], where
//! its bytes are in the slab that is its value: `offsets[i]` and `lengths[i]` (see `buffer_slab`).
//!
//! The columns are made once per JavaScript thread and reused, grown when a batch is larger: the
//! dispatcher (`completions.js`) reads them through before it returns, and one delivery never
//! starts inside another, as both come from callbacks of the thread's event loop.

use std::cell::RefCell;
use std::ffi::c_void;
use std::ptr;

use napi::bindgen_prelude::{JsValuesTupleIntoVec, ToNapiValue};
use napi::sys;
use napi_derive::napi;
use sentinel_recovery::Value;

use crate::buffer_slab;
use crate::errors::check;
use crate::values::{completion_value, many_value};

/// Something waiting for the JavaScript thread.
pub(crate) enum Item {
    /// The result of operation `id`.
    Completion(u32, sentinel_recovery::Result<Value>),
    /// The results of operation `id` (a pipeline's, or EXEC's: `None` when a watched key
    /// changed), each a reply or that command's error.
    Many(
        u32,
        sentinel_recovery::Result<Option<Vec<sentinel_recovery::Result<Value>>>>,
    ),
    /// An event, as JSON.
    Event(String),
}

/// What item `i` of a batch is, in `columns.kinds[i]`.
#[napi]
pub enum BatchKind {
    /// Operation `ids[i]` resolves with the item's value.
    Resolved = 0,
    /// Operation `ids[i]` rejects with the item's value, an error.
    Rejected = 1,
    /// Operation `ids[i]` resolves with a Buffer of `lengths[i]` bytes at `offsets[i]` of the
    /// item's value, an ArrayBuffer.
    Bytes = 2,
    /// An event, the item's value its JSON.
    Event = 3,
}

/// Items converted to JavaScript as the wake function's arguments (see the module documentation).
#[doc(hidden)]
pub struct Batch {
    pub(crate) items: Vec<Item>,
    pub(crate) decode: bool,
    pub(crate) make_error: sys::napi_value,
}

impl JsValuesTupleIntoVec for Batch {
    fn into_vec(self, env: sys::napi_env) -> napi::Result<Vec<sys::napi_value>> {
        // SAFETY: napi-rs calls this on the JavaScript thread of `env`, where `make_error` lives.
        Ok(unsafe { self.into_args(env) }?.to_vec())
    }
}

impl Batch {
    /// `(columns, count, first, rest)`, on the JavaScript thread of `env`.
    pub(crate) unsafe fn into_args(self, env: sys::napi_env) -> napi::Result<[sys::napi_value; 4]> {
        let n = self.items.len();
        let (columns, rows) = columns_for(env, n)?;
        let count = ToNapiValue::to_napi_value(env, n as u32)?;
        let mut first = ptr::null_mut();
        check(sys::napi_get_undefined(env, &mut first))?;
        let mut rest = first;
        if n > 1 {
            check(sys::napi_create_array_with_length(env, n - 1, &mut rest))?;
        }
        for (i, item) in self.items.iter().enumerate() {
            let row = self.row(env, item)?;
            rows.put(i, &row);
            if i == 0 {
                first = row.value;
            } else {
                check(sys::napi_set_element(env, rest, i as u32 - 1, row.value))?;
            }
        }
        recycle(self.items);
        Ok([columns, count, first, rest])
    }

    unsafe fn row(&self, env: sys::napi_env, item: &Item) -> napi::Result<Row> {
        let settled = |id, (ok, value)| Row {
            kind: if ok {
                BatchKind::Resolved as u8
            } else {
                BatchKind::Rejected as u8
            },
            id,
            value,
            offset: 0,
            length: 0,
        };
        Ok(match item {
            Item::Completion(id, result) => match slab_view(env, result, self.decode) {
                Some((slab, offset, length)) => Row {
                    kind: BatchKind::Bytes as u8,
                    id: *id,
                    value: slab,
                    offset,
                    length,
                },
                None => settled(
                    *id,
                    completion_value(env, result, self.decode, self.make_error)?,
                ),
            },
            Item::Many(id, result) => {
                settled(*id, many_value(env, result, self.decode, self.make_error)?)
            }
            Item::Event(json) => Row {
                kind: BatchKind::Event as u8,
                id: 0,
                value: ToNapiValue::to_napi_value(env, json.as_str())?,
                offset: 0,
                length: 0,
            },
        })
    }
}

/// One item as it goes into the columns and the values.
struct Row {
    /// A [`BatchKind`].
    kind: u8,
    id: u32,
    value: sys::napi_value,
    offset: u32,
    length: u32,
}

/// A small Buffer reply as its slab and where its bytes are in it; JavaScript makes the view.
/// `None` for any other result, or when the slab can't be had (the reply is then copied).
unsafe fn slab_view(
    env: sys::napi_env,
    result: &sentinel_recovery::Result<Value>,
    decode: bool,
) -> Option<(sys::napi_value, u32, u32)> {
    let Ok(Value::Bulk(bytes)) = result else {
        return None;
    };
    if decode || bytes.len() > buffer_slab::LARGEST {
        return None;
    }
    let (slab, offset) = buffer_slab::place(env, bytes).ok()?;
    Some((slab, offset as u32, bytes.len() as u32))
}

/// Bytes per item in the columns' buffer: id, offset and length (u32 each), then kind (u8).
const ROW_BYTES: usize = 13;

/// Rows of the first columns made on a thread.
const FIRST_CAPACITY: usize = 64;

/// The columns of one JavaScript thread.
struct Columns {
    /// A strong reference to `{ids, kinds, offsets, lengths}`, or null before the first batch.
    object: sys::napi_ref,
    /// A strong reference to their ArrayBuffer, checked before each use.
    buffer: sys::napi_ref,
    /// Rows the buffer holds.
    capacity: usize,
    /// The environment's cleanup hook that releases the references is registered.
    hooked: bool,
}

thread_local! {
    static COLUMNS: RefCell<Columns> = const {
        RefCell::new(Columns {
            object: ptr::null_mut(),
            buffer: ptr::null_mut(),
            capacity: 0,
            hooked: false,
        })
    };
}

/// Where rows go: the columns' buffer, laid out as `ids`, `offsets`, `lengths` (`capacity` u32
/// each), then `kinds` (`capacity` bytes).
struct Rows {
    data: *mut u8,
    capacity: usize,
}

impl Rows {
    /// Writes row `i` (below `capacity`).
    unsafe fn put(&self, i: usize, row: &Row) {
        debug_assert!(i < self.capacity);
        let words = self.data.cast::<u32>();
        // SAFETY: `data` is the live, 8-aligned buffer of `ROW_BYTES * capacity` bytes.
        *words.add(i) = row.id;
        *words.add(self.capacity + i) = row.offset;
        *words.add(2 * self.capacity + i) = row.length;
        *self.data.add(12 * self.capacity + i) = row.kind;
    }
}

/// This thread's columns with room for `n` rows (made or grown as needed).
unsafe fn columns_for(env: sys::napi_env, n: usize) -> napi::Result<(sys::napi_value, Rows)> {
    COLUMNS.with(|c| {
        let mut c = c.borrow_mut();
        if !c.hooked {
            check(sys::napi_add_env_cleanup_hook(
                env,
                Some(release_at_teardown),
                env.cast(),
            ))?;
            c.hooked = true;
        }
        if let Some(current) = c.current(env, n)? {
            return Ok(current);
        }
        c.renew(env, n.max(FIRST_CAPACITY).next_power_of_two())
    })
}

/// The environment's cleanup hook: the references go while the environment lives.
unsafe extern "C" fn release_at_teardown(env: *mut c_void) {
    let _ = COLUMNS.try_with(|c| {
        if let Ok(mut c) = c.try_borrow_mut() {
            c.release(env.cast());
            c.hooked = false;
        }
    });
}

impl Columns {
    /// The columns and their rows, if they exist, hold `n` rows and their buffer is attached.
    unsafe fn current(
        &self,
        env: sys::napi_env,
        n: usize,
    ) -> napi::Result<Option<(sys::napi_value, Rows)>> {
        if self.object.is_null() || n > self.capacity {
            return Ok(None);
        }
        let mut buffer = ptr::null_mut();
        check(sys::napi_get_reference_value(env, self.buffer, &mut buffer))?;
        let mut data = ptr::null_mut();
        let mut length = 0;
        check(sys::napi_get_arraybuffer_info(
            env,
            buffer,
            &mut data,
            &mut length,
        ))?;
        if data.is_null() || length != ROW_BYTES * self.capacity {
            return Ok(None);
        }
        let mut object = ptr::null_mut();
        check(sys::napi_get_reference_value(env, self.object, &mut object))?;
        let rows = Rows {
            data: data.cast(),
            capacity: self.capacity,
        };
        Ok(Some((object, rows)))
    }

    /// New columns of `capacity` rows in place of the old ones.
    unsafe fn renew(
        &mut self,
        env: sys::napi_env,
        capacity: usize,
    ) -> napi::Result<(sys::napi_value, Rows)> {
        let mut data = ptr::null_mut();
        let mut buffer = ptr::null_mut();
        check(sys::napi_create_arraybuffer(
            env,
            ROW_BYTES * capacity,
            &mut data,
            &mut buffer,
        ))?;
        let mut object = ptr::null_mut();
        check(sys::napi_create_object(env, &mut object))?;
        let u32s = sys::TypedarrayType::uint32_array;
        for (name, kind, offset) in [
            (c"ids", u32s, 0),
            (c"offsets", u32s, 4 * capacity),
            (c"lengths", u32s, 8 * capacity),
            (c"kinds", sys::TypedarrayType::uint8_array, 12 * capacity),
        ] {
            let mut array = ptr::null_mut();
            check(sys::napi_create_typedarray(
                env, kind, capacity, buffer, offset, &mut array,
            ))?;
            check(sys::napi_set_named_property(
                env,
                object,
                name.as_ptr(),
                array,
            ))?;
        }
        let mut object_ref = ptr::null_mut();
        check(sys::napi_create_reference(env, object, 1, &mut object_ref))?;
        let mut buffer_ref = ptr::null_mut();
        if let Err(e) = check(sys::napi_create_reference(env, buffer, 1, &mut buffer_ref)) {
            sys::napi_delete_reference(env, object_ref);
            return Err(e);
        }
        self.release(env);
        self.object = object_ref;
        self.buffer = buffer_ref;
        self.capacity = capacity;
        let rows = Rows {
            data: data.cast(),
            capacity,
        };
        Ok((object, rows))
    }

    /// Lets go of the columns (on the JavaScript thread, while the environment lives).
    unsafe fn release(&mut self, env: sys::napi_env) {
        for reference in [&mut self.object, &mut self.buffer] {
            if !reference.is_null() {
                sys::napi_delete_reference(env, *reference);
                *reference = ptr::null_mut();
            }
        }
        self.capacity = 0;
    }
}

thread_local! {
    /// The JavaScript thread's item buffer, emptied and kept between wake-ups: allocating it anew
    /// for each batch made the allocator consolidate its small free chunks, which then missed its
    /// per-thread cache (about 8 % more instructions per command at 64 in flight, callgrind).
    static SPARE: RefCell<Vec<Item>> = const { RefCell::new(Vec::new()) };
}

/// An empty buffer for a batch, with the capacity of earlier ones.
pub(crate) fn batch_buffer() -> Vec<Item> {
    SPARE.with(|s| s.take())
}

/// Gives a converted batch's buffer back for the next one.
fn recycle(mut items: Vec<Item>) {
    items.clear();
    SPARE.with(|s| {
        if s.borrow().capacity() < items.capacity() {
            *s.borrow_mut() = items;
        }
    });
}
