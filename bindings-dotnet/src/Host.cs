// The one thread (sr-dotnet-host) on which what the library hands to .NET through host
// mailboxes (sr_mailbox_t) reaches managed handlers. Order, coalesced wake-ups, the overflow rule
// and the close barrier are the core's; this file only says how the thread is woken and what a
// delivery becomes.
using System;
using System.Collections.Concurrent;
using System.Diagnostics;
using System.Runtime.InteropServices;
using System.Threading;

namespace SentinelRecovery
{
    /// <summary>Drains ready mailboxes on one dedicated background thread (<c>sr-dotnet-host</c>),
    /// never on a pool or core thread: a slow handler delays later deliveries but never takes a
    /// pool thread (the starvation this library exists to avoid) or a core thread. One thread
    /// serves every client of the process.</summary>
    internal static class Host
    {
        /// <summary>The thread's name, as handlers see it.</summary>
        internal const string ThreadName = "sr-dotnet-host";

        private static readonly Native.WakeCallback WakeCallback = OnWake;
        private static readonly Native.DeliveryCallback DeliveryCallback = OnDelivery;
        internal static readonly IntPtr WakePtr = Marshal.GetFunctionPointerForDelegate(WakeCallback);
        internal static readonly IntPtr DeliveryPtr = Marshal.GetFunctionPointerForDelegate(DeliveryCallback);

        private static readonly ConcurrentQueue<HostMailbox> Ready = new ConcurrentQueue<HostMailbox>();
        private static readonly SemaphoreSlim Signal = new SemaphoreSlim(0);
        private static int _started;

        /// <summary>Starts the thread on first use.</summary>
        internal static void EnsureStarted()
        {
            if (Interlocked.CompareExchange(ref _started, 1, 0) != 0) return;
            var t = new Thread(Run) { IsBackground = true, Name = ThreadName };
            t.Start();
        }

        /// <summary>On the thread that filled the mailbox (a core thread, with the mailbox's lock
        /// held): marks it ready and wakes the host thread; never blocks, never throws.</summary>
        private static void OnWake(IntPtr userData)
        {
            try
            {
                var mailbox = GCHandle.FromIntPtr(userData).Target as HostMailbox;
                if (mailbox == null) return;
                Ready.Enqueue(mailbox);
                Signal.Release();
            }
            catch
            {
                // Nothing may unwind into native code.
            }
        }

        private static void Run()
        {
            for (;;)
            {
                Signal.Wait();
                HostMailbox mailbox;
                while (Ready.TryDequeue(out mailbox)) mailbox.Drain();
            }
        }

        /// <summary>On this thread, inside a drain: hands one delivery to its client.</summary>
        private static unsafe void OnDelivery(IntPtr userData, IntPtr delivery)
        {
            try
            {
                var mailbox = GCHandle.FromIntPtr(userData).Target as HostMailbox;
                var d = (Native.sr_delivery_t*)delivery;
                if (mailbox == null) return;
                if (d->kind == Native.SR_DELIVERY_COMPLETION)
                {
                    var op = mailbox.Take(d->op_id);
                    // What the delivery hands over and nobody took is freed here, never leaked.
                    if (op == null || !op.Complete(delivery)) Native.ReleaseHandedOver(delivery);
                }
                else if (d->kind == Native.SR_DELIVERY_EVENT)
                {
                    var client = mailbox.Client;
                    if (client != null) client.Deliver(d->evt);
                }
                else if (d->kind == Native.SR_DELIVERY_LOG)
                {
                    SentinelClient.DeliverLog(d->level, d->target, d->message);
                }
                else if (d->kind == Native.SR_DELIVERY_DROPPED)
                {
                    SentinelClient.Report(TraceLevel.Warning, "SentinelRecovery: " + d->dropped +
                        (mailbox.Client == null ? " log records" : " events") + " were dropped: handlers did not keep up");
                }
            }
            catch (Exception e)
            {
                // Handler exceptions are reported by the client; this is a conversion failure.
                SentinelClient.Report(TraceLevel.Error, "SentinelRecovery: dropping a delivery that could not be read: " + e.GetType().Name);
            }
        }
    }

    /// <summary>One client's mailbox (<c>sr_mailbox_t</c>) and its place on the host thread.
    /// The client is held weakly, so a client nobody references can still be finalized.</summary>
    internal sealed class HostMailbox
    {
        /// <summary>Events allowed to wait for the host thread in a client's mailbox; beyond it
        /// they are dropped and the count reported as a warning.</summary>
        internal const int EventBound = 65536;

        private readonly WeakReference<SentinelClient> _client;
        private GCHandle _self;
        private IntPtr _pointer;
        private readonly object _lock = new object();
        /// <summary>Calls in flight that complete into this mailbox, by op id.</summary>
        private readonly ConcurrentDictionary<ulong, PendingOp> _ops = new ConcurrentDictionary<ulong, PendingOp>();
        private long _nextId;

        /// <summary>A new op id for <paramref name="op"/>, completed when its delivery comes.</summary>
        internal ulong Register(PendingOp op)
        {
            ulong id = (ulong)Interlocked.Increment(ref _nextId);
            _ops[id] = op;
            return id;
        }

        /// <summary>Forgets a call that was not accepted.</summary>
        internal void Unregister(ulong id)
        {
            PendingOp op;
            _ops.TryRemove(id, out op);
        }

        /// <summary>The call <paramref name="id"/> completes: taken from the table, once.</summary>
        internal PendingOp Take(ulong id)
        {
            PendingOp op;
            return _ops.TryRemove(id, out op) ? op : null;
        }

        private HostMailbox(SentinelClient client) { _client = new WeakReference<SentinelClient>(client); }

        /// <summary>The native mailbox; IntPtr.Zero once freed.</summary>
        internal IntPtr Pointer { get { return _pointer; } }

        /// <summary>The client, while it lives.</summary>
        internal SentinelClient Client
        {
            get
            {
                SentinelClient c;
                return _client.TryGetTarget(out c) ? c : null;
            }
        }

        /// <summary>A new open mailbox for <paramref name="client"/> (null: the process's log
        /// records), drained on the host thread, holding at most <paramref name="bound"/> events
        /// or log records.</summary>
        internal static HostMailbox Create(SentinelClient client, int bound)
        {
            Host.EnsureStarted();
            var m = new HostMailbox(client);
            m._self = GCHandle.Alloc(m);
            IntPtr p;
            int rc = Native.sr_mailbox_new((UIntPtr)(uint)bound, Host.WakePtr, GCHandle.ToIntPtr(m._self), out p);
            if (rc != Native.SR_OK)
            {
                m._self.Free();
                throw SentinelRecoveryException.Create((ErrorCode)rc, Native.Utf8(Native.sr_error_message(rc)));
            }
            m._pointer = p;
            return m;
        }

        /// <summary>On the host thread: delivers what is queued (nothing once freed).</summary>
        internal void Drain()
        {
            lock (_lock)
            {
                if (_pointer == IntPtr.Zero) return;
                UIntPtr n;
                Native.sr_mailbox_drain(_pointer, Host.DeliveryPtr, GCHandle.ToIntPtr(_self), out n);
            }
        }

        /// <summary>Closes the mailbox: when this returns no handler runs for it any more (from a
        /// handler on the host thread: none after that handler), and every call in flight through
        /// it has completed: completions still queued are handed back as closed, here, and any
        /// call whose completion can no longer come fails as closed. Call it after closing the
        /// client (which delivers every completion into the mailbox first). Idempotent.</summary>
        internal void Close()
        {
            IntPtr p = _pointer;
            if (p != IntPtr.Zero) Native.sr_mailbox_close(p, Host.DeliveryPtr, GCHandle.ToIntPtr(_self));
            foreach (var id in _ops.Keys)
            {
                var op = Take(id);
                if (op != null) op.Fail(new ClientClosedException("the client was disposed"));
            }
        }

        /// <summary>Closes and frees the mailbox; call after its client was closed.</summary>
        internal void Free()
        {
            Close();
            lock (_lock)
            {
                if (_pointer == IntPtr.Zero) return;
                Native.sr_mailbox_free(_pointer);
                _pointer = IntPtr.Zero;
                _self.Free();
            }
        }
    }
}
