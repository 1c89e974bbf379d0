//! Small bulk replies as views of one shared ArrayBuffer, as Node cuts its own small Buffers
//! (`Buffer.allocUnsafe`, `Buffer.from(string)`) from an 8 KiB pool.
//!
//! `napi_create_buffer_copy` gives every Buffer an ArrayBuffer and a backing store of its own,
//! which V8 must also track and free: counted with callgrind, a sequential GET with a Buffer
//! reply cost about 4 800 instructions more on the JavaScript thread than the same GET decoded
//! to a string. Here the bytes are copied into the current slab and JavaScript makes the view
//! (`Buffer.from(slab, offset, length)`, a plain object, no backing store).
//!
//! Like Node's pooled Buffers, such a Buffer's `buffer` is the shared slab (`byteOffset` tells
//! where its bytes start), so a small reply keeps its slab alive. The slab is a JavaScript
//! object that code could detach (transfer it to a worker); before each copy the slab's length
//! and address are read again, and a detached slab is replaced, never written.
//!
//! One slab serves every client of a JavaScript thread (as Node's pool serves the thread). The
//! environment's cleanup hook lets go of the slab before the environment ends.

use std::cell::RefCell;
use std::ffi::c_void;
use std::ptr;

use napi::sys;

use crate::errors::check;

/// Size of a slab; Node's `Buffer.poolSize`.
const SLAB: usize = 8 * 1024;

/// Largest reply cut from a slab; larger ones get a Buffer of their own. Half a slab, as Node.
pub(crate) const LARGEST: usize = SLAB / 2;

/// The current slab of one JavaScript thread.
struct BufferSlab {
    /// A strong reference to the slab, or null before the first.
    slab: sys::napi_ref,
    /// Bytes of the slab handed out so far.
    used: usize,
    /// The environment's cleanup hook that releases the slab is registered.
    hooked: bool,
}

thread_local! {
    static CURRENT: RefCell<BufferSlab> = const {
        RefCell::new(BufferSlab { slab: ptr::null_mut(), used: 0, hooked: false })
    };
}

/// Copies `bytes` (at most [`LARGEST`]) into this thread's slab and returns the slab and their
/// offset, for JavaScript to make the view. On the JavaScript thread of `env`.
pub(crate) unsafe fn place(
    env: sys::napi_env,
    bytes: &[u8],
) -> napi::Result<(sys::napi_value, usize)> {
    CURRENT.with(|s| {
        let mut s = s.borrow_mut();
        if !s.hooked {
            check(sys::napi_add_env_cleanup_hook(
                env,
                Some(release_at_teardown),
                env.cast(),
            ))?;
            s.hooked = true;
        }
        s.place(env, bytes)
    })
}

/// The environment's cleanup hook: the slab's reference goes while the environment lives.
unsafe extern "C" fn release_at_teardown(env: *mut c_void) {
    let _ = CURRENT.try_with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            s.release(env.cast());
            s.hooked = false;
        }
    });
}

impl BufferSlab {
    /// Copies `bytes` (at most [`LARGEST`]) into the slab and returns the slab and their offset.
    unsafe fn place(
        &mut self,
        env: sys::napi_env,
        bytes: &[u8],
    ) -> napi::Result<(sys::napi_value, usize)> {
        debug_assert!(bytes.len() <= LARGEST);
        let (mut slab, mut data) = self.current(env)?;
        if data.is_null() || self.used + bytes.len() > SLAB {
            (slab, data) = self.renew(env)?;
        }
        let offset = self.used;
        // SAFETY: `data` is the live slab's start (read just now, its length checked), and
        // `offset + len <= SLAB`.
        ptr::copy_nonoverlapping(bytes.as_ptr(), data.add(offset), bytes.len());
        // Aligned to 8 for the next, as Node aligns its pool.
        self.used = (offset + bytes.len() + 7) & !7;
        Ok((slab, offset))
    }

    /// The slab and its data, or a null pointer when there is none or it was detached.
    unsafe fn current(&self, env: sys::napi_env) -> napi::Result<(sys::napi_value, *mut u8)> {
        if self.slab.is_null() {
            return Ok((ptr::null_mut(), ptr::null_mut()));
        }
        let mut slab = ptr::null_mut();
        check(sys::napi_get_reference_value(env, self.slab, &mut slab))?;
        let mut data = ptr::null_mut();
        let mut length = 0;
        check(sys::napi_get_arraybuffer_info(
            env,
            slab,
            &mut data,
            &mut length,
        ))?;
        if length != SLAB {
            return Ok((slab, ptr::null_mut()));
        }
        Ok((slab, data.cast()))
    }

    /// Starts a new slab (the last one lives on as long as views of it do).
    unsafe fn renew(&mut self, env: sys::napi_env) -> napi::Result<(sys::napi_value, *mut u8)> {
        let mut data = ptr::null_mut();
        let mut slab = ptr::null_mut();
        check(sys::napi_create_arraybuffer(
            env, SLAB, &mut data, &mut slab,
        ))?;
        let mut reference = ptr::null_mut();
        check(sys::napi_create_reference(env, slab, 1, &mut reference))?;
        self.release(env);
        self.slab = reference;
        self.used = 0;
        Ok((slab, data.cast()))
    }

    /// Lets go of the slab (on the JavaScript thread, while the environment lives).
    unsafe fn release(&mut self, env: sys::napi_env) {
        if !self.slab.is_null() {
            sys::napi_delete_reference(env, self.slab);
            self.slab = ptr::null_mut();
        }
    }
}
