// The completion core: a native call in flight, the task it completes, and the two ways its
// outcome arrives. Both only convert and complete a TaskCompletionSource created with
// RunContinuationsAsynchronously, so awaiting code runs on the pool, never where the outcome
// arrived. docs/architecture.md (.NET) says which calls take which way, and the measurement why.
using System;
using System.Runtime.InteropServices;
using System.Threading;
using System.Threading.Tasks;

namespace SentinelRecovery
{
    public sealed partial class SentinelClient
    {
        /// <summary>Starts a native call that completes into <paramref name="mailbox"/> as <paramref name="opId"/>.</summary>
        internal unsafe delegate int MailboxStarter(IntPtr mailbox, ulong opId, IntPtr* operation);

        /// <summary>Starts one native call whose completion reaches the client's mailbox and
        /// completes a <see cref="PendingOp{T}"/> on the host thread; <paramref name="convert"/>
        /// reads the delivery (<c>sr_delivery_t*</c>) of a call that succeeded.</summary>
        internal unsafe Task<T> StartInto<T>(Func<IntPtr, T> convert, CancellationToken ct, MailboxStarter call)
        {
            if (ct.IsCancellationRequested) return Canceled<T>();
            if (Volatile.Read(ref _disposed) != 0) return FaultedOf<T>(new ClientClosedException("the client was disposed"));
            var mailbox = _handle.Mailbox;
            if (mailbox == null) return FaultedOf<T>(new ClientClosedException("the client was disposed"));
            var op = new PendingOp<T>(convert);
            return op.StartInto(ct, mailbox, call);
        }

        /// <summary>Starts a native call of a callback form that calls <paramref name="callback"/>
        /// with <paramref name="userData"/> once.</summary>
        internal unsafe delegate int CallbackStarter(IntPtr callback, IntPtr userData, IntPtr* operation);

        /// <summary>Starts one native call whose outcome comes to <see cref="PendingOp.OutcomeCallback"/>
        /// on a core thread; <paramref name="convert"/> reads the outcome (<c>sr_reply_t*</c> or
        /// <c>sr_results_t*</c>) of a call that succeeded.</summary>
        internal unsafe Task<T> StartWithCallback<T>(Func<IntPtr, T> convert, CancellationToken ct, CallbackStarter call)
        {
            if (ct.IsCancellationRequested) return Canceled<T>();
            if (Volatile.Read(ref _disposed) != 0) return FaultedOf<T>(new ClientClosedException("the client was disposed"));
            return new PendingOp<T>(convert).StartWithCallback(ct, call);
        }

        /// <summary>The client's host mailbox; null once disposed.</summary>
        internal HostMailbox Mailbox
        {
            get { return Volatile.Read(ref _disposed) != 0 ? null : _handle.Mailbox; }
        }

        internal static Task<T> Canceled<T>()
        {
            var t = new TaskCompletionSource<T>();
            t.SetCanceled();
            return t.Task;
        }

        internal static Task<T> FaultedOf<T>(Exception e)
        {
            var t = new TaskCompletionSource<T>();
            t.SetException(e);
            return t.Task;
        }
    }

    /// <summary>A native call in flight: its task, and its cancel handle while it may run.</summary>
    internal abstract class PendingOp
    {
        private static readonly Native.OutcomeCallback Callback = OnOutcome;

        /// <summary>The <c>sr_reply_cb</c> / <c>sr_results_cb</c> of every callback-form call; its
        /// <c>user_data</c> is a GCHandle of the call's op, freed here (the library calls it once).</summary>
        internal static readonly IntPtr OutcomeCallback = Marshal.GetFunctionPointerForDelegate(Callback);

        /// <summary>On a core thread: converts (a copy) and completes the task; nothing else runs here.</summary>
        private static void OnOutcome(IntPtr userData, IntPtr outcome, IntPtr error)
        {
            try
            {
                var handle = GCHandle.FromIntPtr(userData);
                var op = (PendingOp)handle.Target;
                handle.Free();
                op.Settle(outcome, error);
            }
            catch
            {
                // Nothing may unwind into native code.
            }
        }

        /// <summary>The library's <c>sr_operation_t</c>; freed (under the lock) once the task completed.</summary>
        internal IntPtr Operation;
        internal CancellationTokenRegistration Registration;

        /// <summary>On the host thread, with the call's delivery (<c>sr_delivery_t*</c>): converts
        /// and completes the task (unless cancelled already). Returns whether it took what the
        /// delivery hands over (a subscription, a transaction); if not, the caller frees that.</summary>
        internal bool Complete(IntPtr delivery) { return Settle(delivery, Native.Delivery(delivery).error); }

        /// <summary>Fails the task with <paramref name="error"/> (an <c>sr_error_t*</c>) or completes it
        /// with what the op's conversion reads from <paramref name="outcome"/>, unless it is
        /// cancelled already. Returns whether the outcome was taken.</summary>
        internal abstract bool Settle(IntPtr outcome, IntPtr error);

        /// <summary>Fails the task with <paramref name="e"/> (unless it completed already).</summary>
        internal abstract void Fail(Exception e);
    }

    internal sealed class PendingOp<T> : PendingOp
    {
        private static readonly Action<object> CancelOp = s =>
        {
            var op = (PendingOp<T>)s;
            // Cancelled first: the library then completes the operation (with closed), which finds
            // the task done and is discarded.
            op._tcs.TrySetCanceled();
            lock (op)
            {
                if (op.Operation != IntPtr.Zero) Native.sr_operation_cancel(op.Operation);
            }
        };

        private static readonly Action<Task<T>, object> Finish = (t, s) =>
        {
            var op = (PendingOp<T>)s;
            op.Registration.Dispose();
            lock (op)
            {
                if (op.Operation != IntPtr.Zero) Native.sr_operation_free(op.Operation);
                op.Operation = IntPtr.Zero;
            }
        };

        private readonly TaskCompletionSource<T> _tcs =
            new TaskCompletionSource<T>(TaskCreationOptions.RunContinuationsAsynchronously);
        private readonly Func<IntPtr, T> _convert;

        internal PendingOp(Func<IntPtr, T> convert) { _convert = convert; }

        /// <summary>The task of a call the library accepted, cancelled through <paramref name="native"/>
        /// (its <c>sr_operation_t</c>, or zero) when <paramref name="ct"/> is.</summary>
        internal Task<T> Started(CancellationToken ct, IntPtr native)
        {
            lock (this) Operation = native;
            if (ct.CanBeCanceled) Registration = ct.Register(CancelOp, this);
            // On the pool once the task completes: never on a core thread, where disposing the
            // registration could wait for a running cancellation callback.
            _tcs.Task.ContinueWith(Finish, this, CancellationToken.None,
                TaskContinuationOptions.ExecuteSynchronously, TaskScheduler.Default);
            return _tcs.Task;
        }

        internal unsafe Task<T> StartInto(CancellationToken ct, HostMailbox mailbox, SentinelClient.MailboxStarter call)
        {
            ulong id = mailbox.Register(this);
            IntPtr native = IntPtr.Zero;
            int rc;
            try
            {
                rc = call(mailbox.Pointer, id, &native);
            }
            catch (ObjectDisposedException)
            {
                rc = (int)ErrorCode.Closed;
            }
            catch
            {
                mailbox.Unregister(id);
                throw;
            }
            if (rc != Native.SR_OK)
            {
                // Not accepted: no completion will come, so the entry is ours to remove.
                mailbox.Unregister(id);
                return SentinelClient.FaultedOf<T>(SentinelRecoveryException.Create((ErrorCode)rc,
                    rc == (int)ErrorCode.Closed ? "the client was disposed" : Native.Utf8(Native.sr_error_message(rc))));
            }
            return Started(ct, native);
        }

        internal override void Fail(Exception e) { _tcs.TrySetException(e); }

        internal unsafe Task<T> StartWithCallback(CancellationToken ct, SentinelClient.CallbackStarter call)
        {
            var handle = GCHandle.Alloc(this);
            IntPtr native = IntPtr.Zero;
            int rc;
            try
            {
                rc = call(OutcomeCallback, GCHandle.ToIntPtr(handle), &native);
            }
            catch (ObjectDisposedException)
            {
                rc = (int)ErrorCode.Closed;
            }
            catch
            {
                handle.Free();
                throw;
            }
            if (rc != Native.SR_OK)
            {
                // Not accepted: the callback will never come, so the handle is ours to free.
                handle.Free();
                return SentinelClient.FaultedOf<T>(SentinelRecoveryException.Create((ErrorCode)rc,
                    rc == (int)ErrorCode.Closed ? "the client was disposed" : Native.Utf8(Native.sr_error_message(rc))));
            }
            return Started(ct, native);
        }

        internal override bool Settle(IntPtr outcome, IntPtr error)
        {
            if (_tcs.Task.IsCompleted) return false; // cancelled: the result is discarded
            try
            {
                if (error != IntPtr.Zero) _tcs.TrySetException(SentinelRecoveryException.FromNative(error));
                else _tcs.TrySetResult(_convert(outcome));
                return true;
            }
            catch (Exception e)
            {
                _tcs.TrySetException(e);
                return false;
            }
        }
    }
}
