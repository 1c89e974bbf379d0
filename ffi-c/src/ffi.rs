//! The machinery of the C boundary that every export stands on:
//!
//! - [`Castable`]: which Rust value a C pointer type stands for and who owns it when the caller
//!   does (a `Box` freed once by its `sr_*_free`, or an `Arc` that each call holds a reference
//!   to), with the only conversions between the two; any of them may also be lent to the caller
//!   (a callback's argument, an element of a reply), never to be freed;
//! - [`Failure`]: the value a call returns when it fails as a whole or panics, derived from its
//!   return type;
//! - [`start`], [`report`] and [`blocking`]: the bodies of the exports (return at once with a
//!   code; with an owned error object too; and waiting for an operation), which catch panics, so
//!   no panic ever crosses the C boundary and no export catches one itself. Only [`blocking`]
//!   hands out the way to wait ([`Waiter`]), which goes through the host layer's one wait and so
//!   its one refusal to block on a core thread (`SR_ERR_CONFIG`).
//!
//! It imports nothing from this crate but the error codes, so every other module can use it.

use std::ffi::{c_int, c_void};
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use sr::host::{Done, Handle, Started};

use crate::codes::SR_ERR_INTERNAL;

/// Success.
pub const SR_OK: c_int = 0;

/// A C pointer type: `*const Self` / `*mut Self` point to a [`Castable::RustType`], owned as
/// [`Castable::Ownership`] says.
pub(crate) trait Castable {
    /// [`OwnedBox`] or [`SharedArc`].
    type Ownership;
    /// What the pointer really points to.
    type RustType;
}

/// Owned by the caller, in a `Box`: freed once, by the type's `sr_*_free`.
pub(crate) enum OwnedBox {}
/// Shared, in an `Arc`: the caller holds one reference (dropped by the type's `sr_*_free`); each
/// call takes one more for its duration, so a concurrent free never frees under its feet.
pub(crate) enum SharedArc {}

/// Hands `value` to the caller as an owned pointer.
pub(crate) fn to_boxed_mut_ptr<C: Castable<Ownership = OwnedBox>>(value: C::RustType) -> *mut C {
    Box::into_raw(Box::new(value)).cast()
}

/// Hands an already boxed value to the caller as an owned pointer (the value does not move, so
/// pointers into it stay valid).
pub(crate) fn box_to_mut_ptr<C: Castable<Ownership = OwnedBox>>(value: Box<C::RustType>) -> *mut C {
    Box::into_raw(value).cast()
}

/// Takes back an owned pointer; `None` for NULL.
///
/// # Safety
/// `ptr` is NULL or came from [`to_boxed_mut_ptr`] and was not freed yet; it must not be used
/// afterwards.
pub(crate) unsafe fn free_box<C: Castable<Ownership = OwnedBox>>(
    ptr: *mut C,
) -> Option<Box<C::RustType>> {
    (!ptr.is_null()).then(|| Box::from_raw(ptr.cast::<C::RustType>()))
}

/// Hands `value` to the caller as a shared pointer holding one reference.
pub(crate) fn to_arc_mut_ptr<C: Castable<Ownership = SharedArc>>(value: C::RustType) -> *mut C {
    Arc::into_raw(Arc::new(value)).cast_mut().cast()
}

/// A new reference to a shared pointer's value for the duration of a call; `None` for NULL.
///
/// # Safety
/// `ptr` is NULL or came from [`to_arc_mut_ptr`] and its caller's reference was not dropped.
pub(crate) unsafe fn clone_arc<C: Castable<Ownership = SharedArc>>(
    ptr: *const C,
) -> Option<Arc<C::RustType>> {
    if ptr.is_null() {
        return None;
    }
    let ptr = ptr.cast::<C::RustType>();
    Arc::increment_strong_count(ptr);
    Some(Arc::from_raw(ptr))
}

/// Takes back the caller's reference of a shared pointer; `None` for NULL.
///
/// # Safety
/// As [`clone_arc`]; the caller's pointer must not be used afterwards.
pub(crate) unsafe fn free_arc<C: Castable<Ownership = SharedArc>>(
    ptr: *const C,
) -> Option<Arc<C::RustType>> {
    (!ptr.is_null()).then(|| Arc::from_raw(ptr.cast::<C::RustType>()))
}

/// A pointer lending `value` to the caller, valid while `value` lives (any ownership: an owned
/// type is also lent to callbacks).
pub(crate) fn to_const_ptr<C: Castable>(value: &C::RustType) -> *const C {
    (value as *const C::RustType).cast()
}

/// The value behind a pointer of any ownership; `None` for NULL.
///
/// # Safety
/// `ptr` is NULL or points to a live `C::RustType` from this library, for `'a`.
pub(crate) unsafe fn try_ref<'a, C: Castable>(ptr: *const C) -> Option<&'a C::RustType> {
    ptr.cast::<C::RustType>().as_ref()
}

/// The value a call returns when it fails as a whole or panics, by return type.
pub(crate) trait Failure {
    /// That value.
    fn failure() -> Self;
}

impl Failure for c_int {
    fn failure() -> c_int {
        SR_ERR_INTERNAL
    }
}

impl Failure for () {
    fn failure() {}
}

impl Failure for usize {
    fn failure() -> usize {
        0
    }
}

impl Failure for u64 {
    fn failure() -> u64 {
        0
    }
}

impl<T> Failure for *const T {
    fn failure() -> *const T {
        std::ptr::null()
    }
}

impl<T> Failure for *mut T {
    fn failure() -> *mut T {
        std::ptr::null_mut()
    }
}

/// Runs an export's body; a panic gives `R`'s [`Failure`] value.
pub(crate) fn guard<R: Failure>(body: impl FnOnce() -> R) -> R {
    guard_or(R::failure, body)
}

/// Runs an export's body; a panic gives `on_panic()` (for the few exports whose documented
/// value on a panic is not their type's [`Failure`], e.g. a static text).
pub(crate) fn guard_or<R>(on_panic: impl FnOnce() -> R, body: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|_| on_panic())
}

/// What an export's error says: a code, and for an error object its owned form.
pub(crate) trait ErrorObject:
    Castable<Ownership = OwnedBox, RustType = Self> + Sized
{
    /// The code the export returns.
    fn code(&self) -> c_int;
    /// The error of a caught panic (`SR_ERR_INTERNAL`).
    fn panicked() -> Self;
}

/// The body of an export that returns at once with a code: `Ok` is SR_OK, `Err` the code of a
/// call that was not accepted (its callback is then never called); a panic is SR_ERR_INTERNAL.
pub(crate) fn start<E: Refusal>(body: impl FnOnce() -> Result<(), E>) -> c_int {
    guard(|| match body() {
        Ok(()) => SR_OK,
        Err(e) => e.refusal_code(),
    })
}

/// What [`start`]'s body may refuse with: a code, or an error object (only its code is kept).
pub(crate) trait Refusal {
    /// The code the export returns.
    fn refusal_code(&self) -> c_int;
}

impl Refusal for c_int {
    fn refusal_code(&self) -> c_int {
        *self
    }
}

impl<E: ErrorObject> Refusal for E {
    fn refusal_code(&self) -> c_int {
        self.code()
    }
}

/// The body of an export that returns at once with a code and an optional `error`
/// out-parameter: `*error` is cleared first; `Err` (or a panic) stores an owned error there and
/// returns its code.
///
/// # Safety
/// `error` is NULL or writable.
pub(crate) unsafe fn report<E: ErrorObject>(
    error: *mut *mut E,
    body: impl FnOnce() -> Result<(), E>,
) -> c_int {
    if !error.is_null() {
        *error = std::ptr::null_mut();
    }
    let outcome = catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|_| Err(E::panicked()));
    match outcome {
        Ok(()) => SR_OK,
        Err(e) => {
            let code = e.code();
            if !error.is_null() {
                *error = to_boxed_mut_ptr::<E>(e);
            }
            code
        }
    }
}

/// The body of an export that blocks its calling thread (and only it): as [`report`], and the
/// body gets the one way to wait, [`Waiter`].
///
/// # Safety
/// `error` is NULL or writable.
pub(crate) unsafe fn blocking<E: ErrorObject>(
    error: *mut *mut E,
    body: impl FnOnce(Waiter) -> Result<(), E>,
) -> c_int {
    report(error, || body(Waiter(PhantomData)))
}

/// The way a [`blocking`] export waits: through the host layer's wait, which refuses with
/// `config` on a core thread (inside a callback), where waiting could starve the very work it
/// waits for.
pub(crate) struct Waiter(PhantomData<*const ()>);

impl Waiter {
    /// Starts an operation with `begin` and waits for its completion (reading the reply on this
    /// thread when `begin` hands it one, see [`Started`]).
    pub(crate) fn wait<T: Send + 'static, S: Into<Started>>(
        &self,
        begin: impl FnOnce(Done<T>) -> S,
    ) -> sr::Result<T> {
        Handle::block(begin)
    }
}

/// The host's `user_data`, carried to a core thread and handed back untouched.
#[derive(Clone, Copy)]
pub(crate) struct UserData(*mut c_void);

// SAFETY: the library never dereferences it; the header tells the host on which threads its
// callbacks run (core threads, or any thread for the log callback).
unsafe impl Send for UserData {}
unsafe impl Sync for UserData {}

impl UserData {
    /// Wraps the host's pointer.
    pub(crate) fn new(user_data: *mut c_void) -> UserData {
        UserData(user_data)
    }

    /// The host's pointer, as it gave it.
    pub(crate) fn get(self) -> *mut c_void {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::c_int;

    use super::{free_box, guard, start, to_boxed_mut_ptr, try_ref, Castable, OwnedBox, SR_OK};
    use crate::codes::SR_ERR_INTERNAL;

    struct Thing;
    impl Castable for Thing {
        type Ownership = OwnedBox;
        type RustType = String;
    }

    #[test]
    fn panics_become_the_failure_of_the_return_type() {
        let code: c_int = guard(|| panic!("boom"));
        assert_eq!(code, SR_ERR_INTERNAL);
        let p: *const u8 = guard(|| panic!("boom"));
        assert!(p.is_null());
        assert_eq!(
            start(|| -> Result<(), c_int> { panic!("boom") }),
            SR_ERR_INTERNAL
        );
        assert_eq!(start(|| Err(7)), 7);
        assert_eq!(start(|| Ok::<(), c_int>(())), SR_OK);
    }

    #[test]
    fn boxes_round_trip() {
        let p = to_boxed_mut_ptr::<Thing>("x".to_string());
        assert_eq!(unsafe { try_ref(p) }.map(String::as_str), Some("x"));
        assert_eq!(
            unsafe { free_box(p) }.as_deref().map(String::as_str),
            Some("x")
        );
        assert!(unsafe { free_box::<Thing>(std::ptr::null_mut()) }.is_none());
    }
}
