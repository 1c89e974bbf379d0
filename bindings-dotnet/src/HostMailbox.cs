using System;
using System.Collections.Concurrent;
using System.Runtime.InteropServices;
using System.Threading;

namespace SentinelRecovery
{
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
