//! Arguments from JavaScript: a command's arguments (strings and Buffers/Uint8Arrays) as bytes,
//! a `timeoutMs` as a deadline, the flat option list as pairs.
//!
//! One command's arguments are read straight from the JavaScript array into one byte buffer,
//! with raw napi calls: no `String` per argument, no borrow tracking of the typed arrays (the
//! bytes are copied while the call holds the array), and the buffers of the last command read
//! on this thread are used again for the next. Counted with callgrind for a two-argument GET:
//! napi-rs's `Vec<Either<String, &[u8]>>` took about 4 000 instructions, this about 2 200.
//!
//! Strings are read as UTF-8. `index.js` refuses a string with a lone surrogate before it gets
//! here (it has no exact UTF-8 form; napi would write U+FFFD in its place).

use std::cell::RefCell;
use std::ptr;
use std::time::Duration;

use napi::bindgen_prelude::FromNapiValue;
use napi::{sys, Status};
use sentinel_recovery::deadline::{optional_call_timeout, Unit};
use sentinel_recovery::Error as SrError;

use crate::errors::check;

/// Longest UTF-8 form of one character napi writes (a surrogate pair).
const LONGEST_CHARACTER: usize = 4;

/// Bytes a read tries to take in one call before it asks a string's length.
const FIRST_TRY: usize = 256;

/// Buffers larger than this are not kept for the next command (a one-off large value would
/// otherwise stay allocated for the thread's life).
const KEEP_AT_MOST: usize = 64 * 1024;

thread_local! {
    /// The buffers of the last `Args` dropped on this thread, for the next one.
    static SPARE: RefCell<Option<(Vec<u8>, Vec<usize>)>> = const { RefCell::new(None) };
}

/// One command's arguments, in order, as bytes.
pub struct Args {
    bytes: Vec<u8>,
    /// Where each argument ends in `bytes`.
    ends: Vec<usize>,
}

impl Args {
    /// The arguments as slices, handed to `f` (on the stack for up to `INLINE` arguments: a
    /// command of a few arguments allocates nothing here).
    pub fn with_slices<R>(&self, f: impl FnOnce(&[&[u8]]) -> R) -> R {
        const INLINE: usize = 8;
        if self.ends.len() <= INLINE {
            let mut slices: [&[u8]; INLINE] = [&[]; INLINE];
            for (slot, arg) in slices.iter_mut().zip(self.iter()) {
                *slot = arg;
            }
            f(&slices[..self.ends.len()])
        } else {
            f(&self.iter().collect::<Vec<_>>())
        }
    }

    /// The arguments, each copied into its own vector (for work that outlives the call).
    pub fn to_vecs(&self) -> Vec<Vec<u8>> {
        self.iter().map(<[u8]>::to_vec).collect()
    }

    fn iter(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(self.ends.iter().copied())
            .map(|(start, end)| &self.bytes[start..end])
    }

    /// Empty buffers, the thread's spare ones if it has them.
    fn new() -> Args {
        let (bytes, ends) = SPARE
            .with(|spare| spare.borrow_mut().take())
            .unwrap_or_default();
        Args { bytes, ends }
    }

    /// Appends the string or byte array `value` as the next argument (`index` names it in an
    /// error).
    unsafe fn push(
        &mut self,
        env: sys::napi_env,
        value: sys::napi_value,
        index: u32,
    ) -> napi::Result<()> {
        let mut kind = 0;
        check(sys::napi_typeof(env, value, &mut kind))?;
        match kind {
            sys::ValueType::napi_string => self.push_string(env, value)?,
            sys::ValueType::napi_object => self.push_bytes(env, value, index)?,
            _ => return Err(not_an_argument(index)),
        }
        self.ends.push(self.bytes.len());
        Ok(())
    }

    unsafe fn push_string(
        &mut self,
        env: sys::napi_env,
        value: sys::napi_value,
    ) -> napi::Result<()> {
        let start = self.bytes.len();
        self.bytes.reserve(FIRST_TRY);
        let room = self.bytes.capacity() - start;
        let mut written = 0;
        // napi writes at most `room - 1` bytes (then a NUL) and stops only between characters:
        // with room for one more character left over, the string has ended. Most arguments are
        // read by this one call; others ask their length first.
        check(sys::napi_get_value_string_utf8(
            env,
            value,
            self.bytes.as_mut_ptr().add(start).cast(),
            room,
            &mut written,
        ))?;
        if room - 1 - written < LONGEST_CHARACTER {
            let mut length = 0;
            check(sys::napi_get_value_string_utf8(
                env,
                value,
                ptr::null_mut(),
                0,
                &mut length,
            ))?;
            self.bytes.reserve(length + 1);
            check(sys::napi_get_value_string_utf8(
                env,
                value,
                self.bytes.as_mut_ptr().add(start).cast(),
                length + 1,
                &mut written,
            ))?;
        }
        // SAFETY: napi initialized `written` bytes from `start`, within the capacity.
        self.bytes.set_len(start + written);
        Ok(())
    }

    unsafe fn push_bytes(
        &mut self,
        env: sys::napi_env,
        value: sys::napi_value,
        index: u32,
    ) -> napi::Result<()> {
        let mut is_typed_array = false;
        check(sys::napi_is_typedarray(env, value, &mut is_typed_array))?;
        if !is_typed_array {
            return Err(not_an_argument(index));
        }
        let mut kind = 0;
        let mut length = 0;
        let mut data = ptr::null_mut();
        let mut array_buffer = ptr::null_mut();
        let mut offset = 0;
        check(sys::napi_get_typedarray_info(
            env,
            value,
            &mut kind,
            &mut length,
            &mut data,
            &mut array_buffer,
            &mut offset,
        ))?;
        if kind != sys::TypedarrayType::uint8_array {
            return Err(not_an_argument(index));
        }
        if length > 0 {
            // SAFETY: a Uint8Array's `length` bytes at `data`, alive while this call holds it.
            self.bytes
                .extend_from_slice(std::slice::from_raw_parts(data.cast::<u8>(), length));
        }
        Ok(())
    }
}

impl Drop for Args {
    fn drop(&mut self) {
        if self.bytes.capacity() <= KEEP_AT_MOST {
            let mut bytes = std::mem::take(&mut self.bytes);
            let mut ends = std::mem::take(&mut self.ends);
            bytes.clear();
            ends.clear();
            // `try_with`: a thread that is ending has no spare buffers to keep.
            let _ = SPARE.try_with(|spare| *spare.borrow_mut() = Some((bytes, ends)));
        }
    }
}

fn not_an_argument(index: u32) -> napi::Error {
    napi::Error::new(
        Status::InvalidArg,
        format!("argument {index} must be a string, Buffer or Uint8Array"),
    )
}

impl FromNapiValue for Args {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> napi::Result<Args> {
        let mut is_array = false;
        check(sys::napi_is_array(env, value, &mut is_array))?;
        if !is_array {
            return Err(napi::Error::new(
                Status::InvalidArg,
                "a command must be an array of arguments",
            ));
        }
        let mut count = 0;
        check(sys::napi_get_array_length(env, value, &mut count))?;
        let mut args = Args::new();
        for index in 0..count {
            let mut item = ptr::null_mut();
            check(sys::napi_get_element(env, value, index, &mut item))?;
            args.push(env, item, index)?;
        }
        Ok(args)
    }
}

/// A command's deadline from JavaScript's `timeoutMs`, under the rule every binding keeps
/// (`sentinel_recovery::deadline`).
pub(crate) fn deadline(timeout_ms: Option<f64>) -> sentinel_recovery::Result<Option<Duration>> {
    optional_call_timeout(timeout_ms, Unit::Milliseconds)
}

/// The flat `[key, value, key, value, ...]` option list as pairs.
pub(crate) fn pairs(options: &[String]) -> sentinel_recovery::Result<Vec<(&String, &String)>> {
    let mut pairs = Vec::with_capacity(options.len() / 2);
    for pair in options.chunks(2) {
        let [key, value] = pair else {
            return Err(SrError::config("option without a value"));
        };
        pairs.push((key, value));
    }
    Ok(pairs)
}
