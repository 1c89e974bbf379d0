// Pub/sub for applications over the C ABI's sr_subscription_t: SentinelClient.SubscribeAsync and
// the Subscription it gives. The subscription, its changes and its messages (read one at a time
// with sr_subscription_next_into) all complete through the client's host mailbox on the
// sr-dotnet-host thread, which hands the messages, in order, to the Message event's own thread
// (sr-dotnet-messages).
using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Diagnostics;
using System.Runtime.InteropServices;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace SentinelRecovery
{
    /// <summary>One pub/sub message (copied: it stays valid after the handler returns).</summary>
    public sealed class MessageEventArgs : EventArgs
    {
        /// <summary>The channel it was published to.</summary>
        public byte[] Channel { get; internal set; }
        /// <summary>The pattern it matched (<see cref="SentinelClient.SubscribeAsync(IEnumerable{string}, IEnumerable{string}, int, CancellationToken)"/> with
        /// patterns), or null for a channel subscription.</summary>
        public byte[] Pattern { get; internal set; }
        /// <summary>The payload, as published.</summary>
        public byte[] Payload { get; internal set; }
        /// <summary><see cref="Channel"/> as UTF-8 text.</summary>
        public string ChannelText { get { return Encoding.UTF8.GetString(Channel); } }
        /// <summary><see cref="Pattern"/> as UTF-8 text, or null.</summary>
        public string PatternText { get { return Pattern == null ? null : Encoding.UTF8.GetString(Pattern); } }
        /// <summary><see cref="Payload"/> as UTF-8 text.</summary>
        public string PayloadText { get { return Encoding.UTF8.GetString(Payload); } }
    }

    public sealed partial class SentinelClient
    {
        /// <summary>A pub/sub subscription of the client lost its node: messages are missed until
        /// <see cref="SubscriptionRestored"/> (Redis pub/sub is at-most-once).</summary>
        public event EventHandler<SubscriptionEventArgs> SubscriptionLost
        {
            add { Attach(ref _onSubscriptionLost, value); }
            remove { lock (_eventsGate) _onSubscriptionLost -= value; }
        }
        private EventHandler<SubscriptionEventArgs> _onSubscriptionLost;
        /// <summary>A pub/sub subscription is back, every channel and pattern subscribed again on
        /// the node the client uses now; <see cref="SubscriptionEventArgs.GapMs"/> says how long it was lost.</summary>
        public event EventHandler<SubscriptionEventArgs> SubscriptionRestored
        {
            add { Attach(ref _onSubscriptionRestored, value); }
            remove { lock (_eventsGate) _onSubscriptionRestored -= value; }
        }
        private EventHandler<SubscriptionEventArgs> _onSubscriptionRestored;

        /// <summary>Subscribes to <paramref name="channels"/>: <c>await client.SubscribeAsync("news")</c>
        /// (see <see cref="SubscribeAsync(IEnumerable{string}, IEnumerable{string}, int, CancellationToken)"/>).</summary>
        public Task<Subscription> SubscribeAsync(params string[] channels)
        {
            return SubscribeAsync((IEnumerable<string>)channels, null, 0);
        }

        /// <summary>Subscribes to glob-style <paramref name="patterns"/>; their messages carry
        /// <see cref="MessageEventArgs.Pattern"/>.</summary>
        public Task<Subscription> PsubscribeAsync(params string[] patterns)
        {
            return SubscribeAsync(new string[0], patterns, 0);
        }

        /// <summary>
        /// Subscribes to <paramref name="channels"/> and <paramref name="patterns"/> (at least one
        /// name in all) on a connection of the library's own and completes, without holding a pool
        /// thread, once the node confirmed them. The subscription follows failovers:
        /// <see cref="SubscriptionLost"/> and <see cref="SubscriptionRestored"/> tell when messages
        /// were missed. Messages are raised as <see cref="Subscription.Message"/> on the dedicated
        /// <c>sr-dotnet-messages</c> thread; at most <paramref name="buffer"/> of them (default
        /// 4096) wait for it, beyond that the newest are dropped and counted
        /// (<see cref="Subscription.Dropped"/>). Dispose the subscription when done. The client's
        /// <c>command_timeout_ms</c> bounds the wait for the confirmation; cancelling the token
        /// ends it (a subscription confirmed after that is closed for you).
        /// </summary>
        /// <exception cref="ConfigException">No name at all (the task fails).</exception>
        public unsafe Task<Subscription> SubscribeAsync(IEnumerable<string> channels, IEnumerable<string> patterns = null, int buffer = 0,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            if (channels == null) throw new ArgumentNullException("channels");
            if (buffer < 0) throw new ArgumentOutOfRangeException("buffer");
            int capacity = buffer == 0 ? 4096 : buffer;
            var names = new NameList(channels);
            var pats = new NameList(patterns ?? new string[0]);
            // On the host thread: the subscription is ours from this delivery on; it starts reading.
            return StartInto(d => Subscription.Start(this, Native.Delivery(d).subscription, capacity), cancellationToken,
                (mailbox, id, op) =>
                {
                    fixed (byte* cb = names.Bytes)
                    fixed (byte* pb = pats.Bytes)
                    {
                        IntPtr* cp = stackalloc IntPtr[Math.Max(names.Count, 1)];
                        UIntPtr* cl = stackalloc UIntPtr[Math.Max(names.Count, 1)];
                        IntPtr* pp = stackalloc IntPtr[Math.Max(pats.Count, 1)];
                        UIntPtr* pl = stackalloc UIntPtr[Math.Max(pats.Count, 1)];
                        names.Fill(cb, cp, cl);
                        pats.Fill(pb, pp, pl);
                        return NativePubSub.sr_client_subscribe_into(_handle, (UIntPtr)(uint)names.Count, cp, cl,
                            (UIntPtr)(uint)pats.Count, pp, pl, (UIntPtr)(uint)buffer, op, mailbox, id);
                    }
                });
        }
    }

    /// <summary>Names as one buffer of bytes with offsets, for pointers into it.</summary>
    internal sealed class NameList
    {
        internal readonly byte[] Bytes;
        internal readonly int Count;
        private readonly int[] _offsets;
        private readonly int[] _lengths;

        internal NameList(IEnumerable<string> names)
        {
            var list = new List<byte[]>();
            foreach (var n in names)
            {
                if (n == null) throw new ArgumentException("names must not be null");
                list.Add(Encoding.UTF8.GetBytes(n));
            }
            Count = list.Count;
            _offsets = new int[Count];
            _lengths = new int[Count];
            int total = 0;
            foreach (var b in list) total += b.Length;
            Bytes = new byte[Math.Max(total, 1)];
            int pos = 0;
            for (int i = 0; i < Count; i++)
            {
                _offsets[i] = pos;
                _lengths[i] = list[i].Length;
                Buffer.BlockCopy(list[i], 0, Bytes, pos, list[i].Length);
                pos += list[i].Length;
            }
        }

        internal unsafe void Fill(byte* bytes, IntPtr* ptrs, UIntPtr* lens)
        {
            for (int i = 0; i < Count; i++)
            {
                ptrs[i] = (IntPtr)(bytes + _offsets[i]);
                lens[i] = (UIntPtr)(uint)_lengths[i];
            }
        }
    }

    /// <summary>
    /// A pub/sub subscription on a connection of the library's own that follows failovers (see
    /// <see cref="SentinelClient.SubscribeAsync(IEnumerable{string}, IEnumerable{string}, int, CancellationToken)"/>). Redis pub/sub is at-most-once: what is
    /// published while the subscription is between nodes is not received.
    /// Thread-safe. Dispose it when done: once <see cref="Dispose"/> returns (or the client is
    /// disposed), no <see cref="Message"/> handler starts again.
    /// </summary>
    public sealed class Subscription : IDisposable
    {
        /// <summary>Held weakly, as the mailbox holds it: a client nobody references can still be
        /// finalized while its subscription waits for a message.</summary>
        private readonly WeakReference<SentinelClient> _client;
        private IntPtr _native;
        private int _disposed;
        private readonly int _capacity;
        private int _queued;
        private long _localDropped;
        /// <summary>Held while a Message handler runs; Dispose takes it to wait for one in progress.</summary>
        private readonly object _gate = new object();
        /// <summary>Held around every use of <see cref="_native"/> (none blocks), so Dispose never
        /// frees it under a concurrent call.</summary>
        private readonly object _nativeLock = new object();

        private Subscription(SentinelClient client, IntPtr native, int capacity)
        {
            _client = new WeakReference<SentinelClient>(client);
            _native = native;
            _capacity = capacity;
        }

        /// <summary>On the host thread: wraps a subscription the library handed over and starts
        /// reading its messages.</summary>
        internal static Subscription Start(SentinelClient client, IntPtr native, int capacity)
        {
            var sub = new Subscription(client, native, capacity);
            sub.ReadNext();
            return sub;
        }

        /// <summary>Raised with each message, in order, on the dedicated <c>sr-dotnet-messages</c>
        /// thread (one for the process), one call at a time; keep handlers short. An exception thrown
        /// by a handler is reported through <see cref="SentinelClient.Log"/> and delivery goes on.</summary>
        public event EventHandler<MessageEventArgs> Message;

        /// <summary>Messages dropped because too many waited for the handlers (the newest are dropped).</summary>
        public long Dropped
        {
            get
            {
                long core = 0;
                lock (_nativeLock)
                {
                    if (_native != IntPtr.Zero) core = (long)NativePubSub.sr_subscription_dropped(_native);
                }
                return core + Interlocked.Read(ref _localDropped);
            }
        }

        /// <summary>Adds channels; completes once the node confirmed them.</summary>
        public Task SubscribeAsync(params string[] channels) { return Change(1, channels); }
        /// <summary>Adds glob-style patterns.</summary>
        public Task PsubscribeAsync(params string[] patterns) { return Change(2, patterns); }
        /// <summary>Removes channels: once the task completes no message of theirs is raised.</summary>
        public Task UnsubscribeAsync(params string[] channels) { return Change(3, channels); }
        /// <summary>Removes patterns.</summary>
        public Task PunsubscribeAsync(params string[] patterns) { return Change(4, patterns); }

        private unsafe Task Change(int change, string[] names)
        {
            if (names == null) throw new ArgumentNullException("names");
            var list = new NameList(names);
            SentinelClient client;
            if (!_client.TryGetTarget(out client))
                return SentinelClient.FaultedOf<bool>(new ClientClosedException("the client was disposed"));
            return client.StartInto(d => true, CancellationToken.None, (mailbox, id, op) =>
            {
                fixed (byte* b = list.Bytes)
                {
                    IntPtr* ptrs = stackalloc IntPtr[Math.Max(list.Count, 1)];
                    UIntPtr* lens = stackalloc UIntPtr[Math.Max(list.Count, 1)];
                    list.Fill(b, ptrs, lens);
                    lock (_nativeLock)
                    {
                        return _native == IntPtr.Zero
                            ? (int)ErrorCode.Closed
                            : NativePubSub.sr_subscription_change_into(_native, change, (UIntPtr)(uint)list.Count, ptrs, lens, mailbox, id);
                    }
                }
            });
        }

        /// <summary>Ends the subscription: its connection closes and, once this returns, no
        /// <see cref="Message"/> handler starts again (called from a handler, that call finishes
        /// first). Idempotent.</summary>
        public void Dispose()
        {
            if (Interlocked.Exchange(ref _disposed, 1) != 0) return;
            lock (_nativeLock)
            {
                if (_native != IntPtr.Zero)
                {
                    // The message being waited for completes as "ended"; none is raised after this.
                    NativePubSub.sr_subscription_close(_native);
                    NativePubSub.sr_subscription_free(_native);
                    _native = IntPtr.Zero;
                }
            }
            if (Thread.CurrentThread != MessageDispatcher.Thread)
            {
                lock (_gate) { }
            }
        }

        /// <summary>Asks for the next message, into the client's mailbox (nothing once disposed).</summary>
        private void ReadNext()
        {
            SentinelClient client;
            var mailbox = _client.TryGetTarget(out client) ? client.Mailbox : null;
            if (mailbox == null) return;
            var next = new NextMessage(this);
            ulong id = mailbox.Register(next);
            int rc;
            lock (_nativeLock)
            {
                rc = _native == IntPtr.Zero
                    ? (int)ErrorCode.Closed
                    : NativePubSub.sr_subscription_next_into(_native, mailbox.Pointer, id);
            }
            if (rc != Native.SR_OK) mailbox.Unregister(id);
        }

        /// <summary>On the host thread: one message (copied), handed to the dispatcher thread
        /// unless too many wait there already.</summary>
        private unsafe void Received(IntPtr message)
        {
            if (Volatile.Read(ref _disposed) != 0 || Message == null) return;
            if (Interlocked.Increment(ref _queued) > _capacity)
            {
                Interlocked.Decrement(ref _queued);
                Interlocked.Increment(ref _localDropped);
                return;
            }
            var m = (NativePubSub.sr_message_t*)message;
            var args = new MessageEventArgs
            {
                Channel = Copy(m->channel, m->channel_len),
                Pattern = m->pattern == null ? null : Copy(m->pattern, m->pattern_len),
                Payload = Copy(m->payload, m->payload_len),
            };
            MessageDispatcher.Enqueue(this, args);
        }

        /// <summary>On the dispatcher thread.</summary>
        internal void Raise(MessageEventArgs m)
        {
            Interlocked.Decrement(ref _queued);
            lock (_gate)
            {
                if (Volatile.Read(ref _disposed) != 0) return;
                var handlers = Message;
                if (handlers == null) return;
                foreach (EventHandler<MessageEventArgs> h in handlers.GetInvocationList())
                {
                    try { h(this, m); }
                    catch (Exception e)
                    {
                        SentinelClient.Report(TraceLevel.Error, "SentinelRecovery: a Message handler threw " + e.GetType().FullName + ": " + e.Message);
                    }
                }
            }
        }

        /// <summary>One sr_subscription_next_into in flight: its message (if any) is passed on and the
        /// next one asked for; no message (the subscription ended) or an error ends the reading.</summary>
        private sealed class NextMessage : PendingOp
        {
            private readonly Subscription _sub;

            internal NextMessage(Subscription sub) { _sub = sub; }

            internal override bool Settle(IntPtr delivery, IntPtr error)
            {
                var message = Native.Delivery(delivery).pubsub_message;
                if (error != IntPtr.Zero || message == IntPtr.Zero) return true;
                _sub.Received(message);
                _sub.ReadNext();
                return true;
            }

            internal override void Fail(Exception e) { }
        }

        private static unsafe byte[] Copy(byte* p, UIntPtr len)
        {
            var b = new byte[(int)(uint)len];
            if (b.Length > 0) Marshal.Copy((IntPtr)p, b, 0, b.Length);
            return b;
        }
    }

    /// <summary>Raises Message events on one dedicated background thread (<c>sr-dotnet-messages</c>),
    /// never on a pool thread or a core thread, in the order the core delivered them.</summary>
    internal static class MessageDispatcher
    {
        private struct Item
        {
            public Subscription Sub;
            public MessageEventArgs Message;
        }

        private static readonly BlockingCollection<Item> Queue = new BlockingCollection<Item>(new ConcurrentQueue<Item>());
        private static int _started;
        internal static Thread Thread;

        internal static void Enqueue(Subscription sub, MessageEventArgs m)
        {
            if (Interlocked.CompareExchange(ref _started, 1, 0) == 0)
            {
                var t = new Thread(Run) { IsBackground = true, Name = "sr-dotnet-messages" };
                Thread = t;
                t.Start();
            }
            Queue.Add(new Item { Sub = sub, Message = m });
        }

        private static void Run()
        {
            foreach (var item in Queue.GetConsumingEnumerable()) item.Sub.Raise(item.Message);
        }
    }

    /// <summary>P/Invoke declarations of the pub/sub part of the C ABI.</summary>
    internal static unsafe class NativePubSub
    {
        [StructLayout(LayoutKind.Sequential)]
        internal struct sr_message_t
        {
            public byte* channel;
            public UIntPtr channel_len;
            public byte* pattern;
            public UIntPtr pattern_len;
            public byte* payload;
            public UIntPtr payload_len;
        }

        [DllImport(Native.Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_client_subscribe_into(ClientHandle client, UIntPtr channelsLen, IntPtr* channels,
            UIntPtr* channelsLens, UIntPtr patternsLen, IntPtr* patterns, UIntPtr* patternsLens, UIntPtr buffer,
            IntPtr* operation, IntPtr mailbox, ulong opId);

        [DllImport(Native.Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_subscription_next_into(IntPtr subscription, IntPtr mailbox, ulong opId);

        [DllImport(Native.Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_subscription_change_into(IntPtr subscription, int change, UIntPtr count, IntPtr* names,
            UIntPtr* lens, IntPtr mailbox, ulong opId);

        [DllImport(Native.Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern ulong sr_subscription_dropped(IntPtr subscription);

        [DllImport(Native.Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_subscription_close(IntPtr subscription);

        [DllImport(Native.Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void sr_subscription_free(IntPtr subscription);
    }
}
