using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Globalization;
using System.Runtime.InteropServices;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace SentinelRecovery
{
    /// <summary>
    /// A client of one Sentinel-managed Redis/Valkey service. Discovery, failover handling and all
    /// network I/O run on the library's own threads (<c>sr-worker-N</c>); this class never blocks a
    /// thread-pool thread and never runs your code on a library thread:
    /// <list type="bullet">
    /// <item>command completions go through a <see cref="TaskCompletionSource{T}"/> created with
    /// <see cref="TaskCreationOptions.RunContinuationsAsynchronously"/>, so awaiting code resumes on
    /// the pool (or your synchronization context), not on the library thread that delivered the reply;</item>
    /// <item>events queue in the client's mailbox and are raised on one dedicated background thread
    /// (<c>sr-dotnet-host</c>), in order, the first one reflecting the current primary (a
    /// <see cref="PrimaryChanged"/> from null), so an early change is never missed;</item>
    /// <item>the only calls that block are <see cref="Execute"/> and <see cref="Dispose"/>, and they
    /// block only the calling thread.</item>
    /// </list>
    /// Thread-safe. Dispose it when done (a finalizer closes it otherwise).
    /// </summary>
    public sealed partial class SentinelClient : IDisposable
    {
        private readonly ClientHandle _handle;
        private int _disposed;

        private SentinelClient(ClientHandle handle) { _handle = handle; }

        static SentinelClient()
        {
            // At exit, stop the core's threads so none is left attached to the runtime: Mono's
            // shutdown otherwise waits for the core threads that ever called back.
            AppDomain.CurrentDomain.ProcessExit += (s, e) =>
            {
                try { Native.sr_runtime_shutdown(1000); } catch { }
            };
        }

        /// <summary>The native library's version (<c>MAJOR.MINOR.PATCH</c>).</summary>
        public static string NativeVersion { get { return Native.Utf8(Native.sr_version()); } }

        /// <summary>The native library's name of an error code (<c>"unknown"</c> for a code it does
        /// not know): the same as <see cref="SentinelRecoveryException.CodeName"/> for every code of
        /// <see cref="ErrorCode"/>, both coming from the core's one table.</summary>
        public static string NativeErrorCodeName(ErrorCode code) { return Native.Utf8(Native.sr_error_code_name((int)code)); }

        /// <summary>Sets the number of core worker threads (1..256, default 2 or
        /// <c>SR_WORKER_THREADS</c>). Only before the first client is opened.</summary>
        /// <exception cref="ConfigException">The runtime already runs, or the number is out of range.</exception>
        public static void SetWorkerThreads(int threads)
        {
            if (threads < 0) throw new ArgumentOutOfRangeException("threads");
            IntPtr err;
            int rc = Native.sr_runtime_set_worker_threads((UIntPtr)(uint)threads, out err);
            if (rc != Native.SR_OK) throw SentinelRecoveryException.TakeNative(rc, err);
        }

        /// <summary>
        /// Opens a client and waits (asynchronously, without holding any pool thread) for its first
        /// discovery round. If that round fails the client is disposed and the task fails with the
        /// round's error (<see cref="SentinelsUnreachableException"/>, <see cref="ServiceUnknownException"/>,
        /// <see cref="NoHealthyPrimaryException"/>); use <see cref="Open(string, IDictionary{string, string})"/> to keep a client that
        /// retries in the background instead.
        /// </summary>
        /// <param name="url"><c>redis+sentinel://[user[:password]@]host[:port][,host[:port]...]/service[?key=value&amp;...]</c>
        /// (<c>valkey+sentinel://</c>; <c>rediss+sentinel://</c> for TLS).</param>
        /// <param name="options">Options overriding the URL's query keys (<c>command_timeout_ms</c>,
        /// <c>sentinel_password</c>, <c>read_from</c>, ...), or null.</param>
        /// <param name="cancellationToken">Cancels the wait (the client is then disposed).</param>
        /// <exception cref="ConfigException">Thrown synchronously for an invalid URL or option.</exception>
        public static Task<SentinelClient> ConnectAsync(string url, IDictionary<string, string> options = null,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            return ConnectAsync(url, options, null, cancellationToken);
        }

        /// <summary>
        /// <see cref="ConnectAsync(string, IDictionary{string, string}, CancellationToken)"/> with the
        /// function form of <c>address_map</c>; see <see cref="Open(string, IDictionary{string, string}, Func{NodeAddress, NodeAddress})"/>.
        /// </summary>
        /// <param name="url">The URL.</param>
        /// <param name="options">Options overriding the URL's query keys, or null.</param>
        /// <param name="addressMap">The map, or null for none.</param>
        /// <param name="cancellationToken">Cancels the wait (the client is then disposed).</param>
        public static Task<SentinelClient> ConnectAsync(string url, IDictionary<string, string> options,
            Func<NodeAddress, NodeAddress> addressMap, CancellationToken cancellationToken = default(CancellationToken))
        {
            var client = Open(url, options, addressMap);
            var tcs = new TaskCompletionSource<SentinelClient>(TaskCreationOptions.RunContinuationsAsynchronously);
            client.WaitReady(cancellationToken, true).ContinueWith((t, s) =>
            {
                var c = (SentinelClient)s;
                if (t.IsCanceled) tcs.TrySetCanceled();
                else if (t.IsFaulted) tcs.TrySetException(t.Exception.InnerExceptions);
                else tcs.TrySetResult(c);
            }, client, CancellationToken.None, TaskContinuationOptions.ExecuteSynchronously, TaskScheduler.Default);
            return tcs.Task;
        }

        /// <summary>
        /// Opens a client and returns at once; discovery runs in the background and keeps retrying.
        /// Commands sent before a primary is known wait for one up to their deadline.
        /// </summary>
        /// <param name="url">As for <see cref="ConnectAsync(string, IDictionary{string, string}, CancellationToken)"/>.</param>
        /// <param name="options">As for <see cref="ConnectAsync(string, IDictionary{string, string}, CancellationToken)"/>.</param>
        /// <exception cref="ConfigException">An invalid URL or option (the message names it, never a password).</exception>
        public static SentinelClient Open(string url, IDictionary<string, string> options = null)
        {
            return Open(url, options, null);
        }

        /// <summary>
        /// <see cref="Open(string, IDictionary{string, string})"/> with the function form of
        /// <c>address_map</c> (like ioredis' <c>natMap</c>): <paramref name="addressMap"/> gets each
        /// address a sentinel reports (primary, replicas, other sentinels; never the sentinels of the
        /// URL) and returns the address to connect to instead, or null to use it as reported. It runs
        /// on a library thread, possibly on several at once: keep it quick and thread-safe, never
        /// block in it. An exception in it is logged (<see cref="Log"/>) and the reported address is
        /// used. An <c>address_map</c> option entry that matches wins over the function.
        /// </summary>
        /// <param name="url">As for <see cref="ConnectAsync(string, IDictionary{string, string}, CancellationToken)"/>.</param>
        /// <param name="options">As for <see cref="ConnectAsync(string, IDictionary{string, string}, CancellationToken)"/>.</param>
        /// <param name="addressMap">The map, or null for none.</param>
        /// <exception cref="ConfigException">An invalid URL or option (the message names it, never a password).</exception>
        public static unsafe SentinelClient Open(string url, IDictionary<string, string> options,
            Func<NodeAddress, NodeAddress> addressMap)
        {
            var packed = NativeOptions.Pack(url, options);
            var mapper = AddressMapper.For(addressMap);
            int nopt = packed.Count;
            var opts = new Native.sr_option_t[Math.Max(nopt, 1)];
            ClientHandle handle;
            IntPtr err;
            int rc;
            fixed (byte* b = packed.Buffer)
            fixed (Native.sr_option_t* o = opts)
            {
                packed.Fill(b, o);
                rc = mapper == null
                    ? Native.sr_client_open(b, nopt == 0 ? null : o, (UIntPtr)(uint)nopt, out handle, out err)
                    : Native.sr_client_open_mapped(b, nopt == 0 ? null : o, (UIntPtr)(uint)nopt, mapper.Pointer,
                        IntPtr.Zero, out handle, out err);
            }
            packed.Clear();
            if (rc == Native.SR_OK) handle.AddressMap = mapper;
            GC.KeepAlive(mapper);
            if (rc != Native.SR_OK)
            {
                if (handle != null) handle.Dispose();
                throw SentinelRecoveryException.TakeNative(rc, err);
            }
            var client = new SentinelClient(handle);
            // The mailbox holds the client weakly: a client nobody references can still be
            // finalized (its handle closes it, then the mailbox). Events go to it from the first
            // handler on (see Attach).
            try
            {
                handle.Mailbox = HostMailbox.Create(client, HostMailbox.EventBound);
            }
            catch
            {
                client.Dispose();
                throw;
            }
            return client;
        }

        /// <summary>
        /// Completes when the client's first discovery round has finished: with the topology if it
        /// found a verified primary, otherwise with that round's error (the client stays open and
        /// keeps retrying). Completes at once when the client already follows a healthy primary.
        /// The wait completes through the client's mailbox on the host thread; nothing blocks.
        /// </summary>
        public Task<Topology> WaitReadyAsync(CancellationToken cancellationToken = default(CancellationToken))
        {
            return WaitReady(cancellationToken, false);
        }

        private unsafe Task<Topology> WaitReady(CancellationToken ct, bool disposeOnFailure)
        {
            var tcs = new TaskCompletionSource<Topology>(TaskCreationOptions.RunContinuationsAsynchronously);
            try
            {
                var t = GetTopology();
                if (t.Healthy)
                {
                    tcs.TrySetResult(t);
                    return tcs.Task;
                }
            }
            catch (SentinelRecoveryException e)
            {
                if (disposeOnFailure) Dispose();
                tcs.TrySetException(e);
                return tcs.Task;
            }
            if (ct.IsCancellationRequested)
            {
                if (disposeOnFailure) Dispose();
                tcs.TrySetCanceled();
                return tcs.Task;
            }
            var waited = StartInto(d => Topology.Copy(Native.Delivery(d).topology), ct, (mailbox, id, op) =>
            {
                var o = new Native.sr_call_options_t { timeout_ms = 0, operation = op };
                return Native.sr_client_wait_ready_into(_handle, &o, mailbox, id);
            });
            if (!disposeOnFailure) return waited;
            // ConnectAsync: a client whose first round failed (or was cancelled) is not handed out.
            return waited.ContinueWith(t =>
            {
                if (t.Status != TaskStatus.RanToCompletion) Dispose();
                return t;
            }, CancellationToken.None, TaskContinuationOptions.ExecuteSynchronously, TaskScheduler.Default).Unwrap();
        }

        /// <summary>
        /// Sends one command (name first, then its arguments) and completes with the reply.
        /// Arguments may be <see cref="string"/> (sent as UTF-8), <c>byte[]</c>,
        /// <see cref="ArraySegment{T}"/> of bytes, or any integer or floating-point number: integers
        /// in decimal, <c>double</c> and <c>float</c> as their shortest round-trip text
        /// (<c>2</c>, <c>0.1</c>, <c>1e+21</c>), infinities as <c>inf</c> / <c>-inf</c>. A NaN, or a
        /// string with a lone surrogate, is refused with a <see cref="ConfigException"/> naming the
        /// argument (0 is the command's name), the same in every binding. The deadline is the client's <c>command_timeout_ms</c> option
        /// (default 5000). Errors fault the task with a <see cref="SentinelRecoveryException"/>
        /// subclass (<see cref="ServerException"/> for an error reply, <see cref="ClientClosedException"/>
        /// after or during <see cref="Dispose"/>, ...).
        /// </summary>
        /// <exception cref="ArgumentException">No arguments, or an argument of an unsupported type (thrown synchronously).</exception>
        /// <exception cref="ConfigException">A NaN, or a string with a lone surrogate (thrown synchronously).</exception>
        public Task<RedisReply> ExecuteAsync(params object[] args)
        {
            return ExecuteAsync(CancellationToken.None, args);
        }

        /// <summary>
        /// As <see cref="ExecuteAsync(object[])"/>, cancellable: cancelling the token cancels the
        /// task at once and the command in the library. A command already sent may still have run
        /// on the server; it is never retried.
        /// </summary>
        public Task<RedisReply> ExecuteAsync(CancellationToken cancellationToken, params object[] args)
        {
            return ExecuteWith(0, cancellationToken, args);
        }

        /// <summary>
        /// Sends one command and blocks the calling thread (only it) until the reply or the
        /// deadline. Meant for synchronous code on threads you own; prefer <see cref="ExecuteAsync(object[])"/>
        /// on pool threads.
        /// </summary>
        /// <exception cref="SentinelRecoveryException">The command failed (a subclass per code).</exception>
        public unsafe RedisReply Execute(params object[] args)
        {
            byte[] buf;
            int[] lens;
            Encode(args, out buf, out lens);
            if (Volatile.Read(ref _disposed) != 0) throw new ClientClosedException("the client was disposed");
            int argc = lens.Length;
            var argv = new IntPtr[argc];
            var argvLen = new UIntPtr[argc];
            IntPtr reply, err;
            int rc;
            try
            {
                fixed (byte* b = buf)
                fixed (IntPtr* pv = argv)
                fixed (UIntPtr* pl = argvLen)
                {
                    int pos = 0;
                    for (int i = 0; i < argc; i++)
                    {
                        pv[i] = (IntPtr)(b + pos);
                        pl[i] = (UIntPtr)(uint)lens[i];
                        pos += lens[i];
                    }
                    rc = Native.sr_client_execute_blocking(_handle, (UIntPtr)(uint)argc, pv, pl, out reply, out err);
                }
            }
            catch (ObjectDisposedException)
            {
                throw new ClientClosedException("the client was disposed");
            }
            if (rc != Native.SR_OK) throw SentinelRecoveryException.TakeNative(rc, err);
            try { return RedisReply.Copy(reply); }
            finally { Native.sr_reply_free(reply); }
        }

        /// <summary>The current topology snapshot; never waits on network work.</summary>
        /// <exception cref="ClientClosedException">The client was disposed.</exception>
        public Topology GetTopology()
        {
            if (Volatile.Read(ref _disposed) != 0) throw new ClientClosedException("the client was disposed");
            IntPtr topo, err;
            int rc;
            try
            {
                rc = Native.sr_client_topology(_handle, out topo, out err);
            }
            catch (ObjectDisposedException)
            {
                throw new ClientClosedException("the client was disposed");
            }
            if (rc != Native.SR_OK) throw SentinelRecoveryException.TakeNative(rc, err);
            return Topology.Take(topo);
        }

        /// <summary>The primary changed (also at the first discovery, with a null old primary).</summary>
        public event EventHandler<PrimaryChangedEventArgs> PrimaryChanged
        {
            add { Attach(ref _onPrimaryChanged, value); }
            remove { lock (_eventsGate) _onPrimaryChanged -= value; }
        }
        private EventHandler<PrimaryChangedEventArgs> _onPrimaryChanged;
        /// <summary>The set of healthy replicas changed.</summary>
        public event EventHandler<ReplicasChangedEventArgs> ReplicasChanged
        {
            add { Attach(ref _onReplicasChanged, value); }
            remove { lock (_eventsGate) _onReplicasChanged -= value; }
        }
        private EventHandler<ReplicasChangedEventArgs> _onReplicasChanged;
        /// <summary>A sentinel was learned.</summary>
        public event EventHandler<SentinelsChangedEventArgs> SentinelsChanged
        {
            add { Attach(ref _onSentinelsChanged, value); }
            remove { lock (_eventsGate) _onSentinelsChanged -= value; }
        }
        private EventHandler<SentinelsChangedEventArgs> _onSentinelsChanged;
        /// <summary>A sentinel stopped answering.</summary>
        public event EventHandler<SentinelStateEventArgs> SentinelDown
        {
            add { Attach(ref _onSentinelDown, value); }
            remove { lock (_eventsGate) _onSentinelDown -= value; }
        }
        private EventHandler<SentinelStateEventArgs> _onSentinelDown;
        /// <summary>A sentinel answered again.</summary>
        public event EventHandler<SentinelStateEventArgs> SentinelUp
        {
            add { Attach(ref _onSentinelUp, value); }
            remove { lock (_eventsGate) _onSentinelUp -= value; }
        }
        private EventHandler<SentinelStateEventArgs> _onSentinelUp;
        /// <summary>The connection to the primary broke.</summary>
        public event EventHandler<ConnectionEventArgs> ConnectionLost
        {
            add { Attach(ref _onConnectionLost, value); }
            remove { lock (_eventsGate) _onConnectionLost -= value; }
        }
        private EventHandler<ConnectionEventArgs> _onConnectionLost;
        /// <summary>A connection to the primary works again.</summary>
        public event EventHandler<ConnectionEventArgs> ConnectionRestored
        {
            add { Attach(ref _onConnectionRestored, value); }
            remove { lock (_eventsGate) _onConnectionRestored -= value; }
        }
        private EventHandler<ConnectionEventArgs> _onConnectionRestored;
        /// <summary>A discovery round found no usable primary; the last one is kept, discovery retries.</summary>
        public event EventHandler<DiscoveryFailedEventArgs> DiscoveryFailed
        {
            add { Attach(ref _onDiscoveryFailed, value); }
            remove { lock (_eventsGate) _onDiscoveryFailed -= value; }
        }
        private EventHandler<DiscoveryFailedEventArgs> _onDiscoveryFailed;
        /// <summary>The failover leader started promoting a replica: writes wait until
        /// <see cref="PrimaryChanged"/>, or resume if the failover aborts.</summary>
        public event EventHandler<FailoverStartedEventArgs> FailoverStarted
        {
            add { Attach(ref _onFailoverStarted, value); }
            remove { lock (_eventsGate) _onFailoverStarted -= value; }
        }
        private EventHandler<FailoverStartedEventArgs> _onFailoverStarted;
        /// <summary>A sentinel entered or left TILT.</summary>
        public event EventHandler<SentinelTiltEventArgs> SentinelTilt
        {
            add { Attach(ref _onSentinelTilt, value); }
            remove { lock (_eventsGate) _onSentinelTilt -= value; }
        }
        private EventHandler<SentinelTiltEventArgs> _onSentinelTilt;
        /// <summary>A reachable sentinel does not monitor the service.</summary>
        public event EventHandler<SentinelServiceUnknownEventArgs> SentinelServiceUnknown
        {
            add { Attach(ref _onSentinelServiceUnknown, value); }
            remove { lock (_eventsGate) _onSentinelServiceUnknown -= value; }
        }
        private EventHandler<SentinelServiceUnknownEventArgs> _onSentinelServiceUnknown;

        /// <summary>
        /// Every event, of every kind (after the kind's own event). Handlers of all events run on
        /// the dedicated <c>sr-dotnet-host</c> thread, one at a time, in order; keep them short
        /// (start a task for longer work). An exception thrown by a handler does not stop other
        /// handlers or later events: it is raised as <see cref="EventHandlerError"/> and reported
        /// through <see cref="Log"/> (or <see cref="Trace"/> when no hook is set).
        /// </summary>
        public event EventHandler<TopologyEventArgs> TopologyEvent
        {
            add { Attach(ref _onTopologyEvent, value); }
            remove { lock (_eventsGate) _onTopologyEvent -= value; }
        }
        private EventHandler<TopologyEventArgs> _onTopologyEvent;

        /// <summary>
        /// An event handler of this client threw: the exception and the event it was handling. Runs
        /// on the <c>sr-dotnet-host</c> thread right after the failed handler; an exception thrown
        /// here is only logged.
        /// </summary>
        public event EventHandler<EventHandlerErrorEventArgs> EventHandlerError;

        private static Action<TraceLevel, string> _log;

        /// <summary>
        /// The logging hook of the wrapper: called with a level and a message (never a password)
        /// for what it cannot report otherwise, such as an exception thrown by an event handler or
        /// an event that could not be read. Called on the thread where it happens (for handler
        /// exceptions, <c>sr-dotnet-host</c>); keep it short and don't throw (an exception thrown
        /// by the hook is dropped). When null (the default) messages go to <see cref="Trace"/>
        /// (<c>TraceError</c> / <c>TraceWarning</c> / <c>TraceInformation</c>), so a
        /// <see cref="TraceListener"/> sees them.
        /// </summary>
        public static Action<TraceLevel, string> Log
        {
            get { return Volatile.Read(ref _log); }
            set { Volatile.Write(ref _log, value); }
        }

        /// <summary>Sends a message to <see cref="Log"/>, or to <see cref="Trace"/> without a hook.</summary>
        internal static void Report(TraceLevel level, string message)
        {
            var hook = Log;
            if (hook != null)
            {
                try { hook(level, message); } catch { }
                return;
            }
            try
            {
                if (level == TraceLevel.Error) Trace.TraceError(message);
                else if (level == TraceLevel.Warning) Trace.TraceWarning(message);
                else Trace.TraceInformation(message);
            }
            catch
            {
                // A failing listener must not take the event thread down.
            }
        }

        private readonly object _eventsGate = new object();
        private int _eventsOn;

        /// <summary>Adds <paramref name="handler"/> to an event; the first handler of any event
        /// starts the client's events, so the first one raised reflects the state at that moment.</summary>
        private void Attach<T>(ref T field, T handler) where T : class
        {
            lock (_eventsGate) field = (T)(object)Delegate.Combine((Delegate)(object)field, (Delegate)(object)handler);
            if (handler == null || Interlocked.Exchange(ref _eventsOn, 1) != 0) return;
            try
            {
                var mailbox = _handle.Mailbox;
                // Refused only once closed: there are no events to start then.
                if (mailbox != null) Native.sr_client_set_event_mailbox(_handle, mailbox.Pointer);
            }
            catch (ObjectDisposedException)
            {
            }
        }

        private bool HasSubscribers
        {
            get
            {
                return _onTopologyEvent != null || _onPrimaryChanged != null || _onReplicasChanged != null || _onSentinelsChanged != null ||
                    _onSentinelDown != null || _onSentinelUp != null || _onConnectionLost != null || _onConnectionRestored != null ||
                    _onDiscoveryFailed != null || _onFailoverStarted != null || _onSentinelTilt != null ||
                    _onSentinelServiceUnknown != null || _onSubscriptionLost != null || _onSubscriptionRestored != null;
            }
        }

        /// <summary>On the host thread.</summary>
        internal void Raise(TopologyEventArgs a)
        {
            if (Volatile.Read(ref _disposed) != 0) return;
            switch (a.Kind)
            {
                case EventKind.PrimaryChanged: Invoke(_onPrimaryChanged, a); break;
                case EventKind.ReplicasChanged: Invoke(_onReplicasChanged, a); break;
                case EventKind.SentinelsChanged: Invoke(_onSentinelsChanged, a); break;
                case EventKind.SentinelDown: Invoke(_onSentinelDown, a); break;
                case EventKind.SentinelUp: Invoke(_onSentinelUp, a); break;
                case EventKind.ConnectionLost: Invoke(_onConnectionLost, a); break;
                case EventKind.ConnectionRestored: Invoke(_onConnectionRestored, a); break;
                case EventKind.DiscoveryFailed: Invoke(_onDiscoveryFailed, a); break;
                case EventKind.FailoverStarted: Invoke(_onFailoverStarted, a); break;
                case EventKind.SentinelTilt: Invoke(_onSentinelTilt, a); break;
                case EventKind.SentinelServiceUnknown: Invoke(_onSentinelServiceUnknown, a); break;
                case EventKind.SubscriptionLost: Invoke(_onSubscriptionLost, a); break;
                case EventKind.SubscriptionRestored: Invoke(_onSubscriptionRestored, a); break;
            }
            Invoke(_onTopologyEvent, a);
        }

        private void Invoke(Delegate handlers, TopologyEventArgs a)
        {
            if (handlers == null) return;
            foreach (var h in handlers.GetInvocationList())
            {
                try
                {
                    h.DynamicInvoke(this, a);
                }
                catch (Exception e)
                {
                    var inner = e is System.Reflection.TargetInvocationException && e.InnerException != null ? e.InnerException : e;
                    HandlerFailed(inner, a);
                }
            }
        }

        /// <summary>On the host thread: reports a handler's exception, then carries on.</summary>
        private void HandlerFailed(Exception e, TopologyEventArgs a)
        {
            Report(TraceLevel.Error, "SentinelRecovery: a " + a.KindName + " event handler threw " + e.GetType().FullName + ": " + e.Message);
            var handlers = EventHandlerError;
            if (handlers == null) return;
            var args = new EventHandlerErrorEventArgs(e, a);
            foreach (EventHandler<EventHandlerErrorEventArgs> h in handlers.GetInvocationList())
            {
                try
                {
                    h(this, args);
                }
                catch (Exception again)
                {
                    Report(TraceLevel.Error, "SentinelRecovery: an EventHandlerError handler threw " + again.GetType().FullName + ": " + again.Message);
                }
            }
        }

        /// <summary>
        /// Closes the client: fails its waiting commands with <see cref="ClientClosedException"/>,
        /// stops its events and releases its connections. Blocks the calling thread until every
        /// completion of this client has been delivered (they only complete tasks, so this is short);
        /// no event handler of this client starts afterwards. Safe to call more than once and from
        /// any thread, including event handlers and task continuations.
        /// </summary>
        public void Dispose()
        {
            if (Interlocked.Exchange(ref _disposed, 1) != 0) return;
            _handle.Close_();
            // The barrier: no handler of this client runs once this returned.
            var mailbox = _handle.Mailbox;
            if (mailbox != null) mailbox.Close();
            _handle.Dispose();
        }

        /// <summary>On the host thread: raises one event of this client (from its mailbox).</summary>
        internal void Deliver(IntPtr evt)
        {
            if (!HasSubscribers || Volatile.Read(ref _disposed) != 0) return;
            Raise(EventConversion.Convert(evt));
        }

        // ---- helpers ----

        /// <summary>All arguments into one buffer (pinned only for the duration of the call).</summary>
        private static void Encode(object[] args, out byte[] buf, out int[] lens)
        {
            if (args == null || args.Length == 0) throw new ArgumentException("a command needs at least its name", "args");
            var parts = new byte[args.Length][];
            lens = new int[args.Length];
            int total = 0;
            for (int i = 0; i < args.Length; i++)
            {
                parts[i] = ToBytes(args[i], i);
                lens[i] = parts[i].Length;
                total += parts[i].Length;
            }
            buf = new byte[total];
            int pos = 0;
            foreach (var p in parts)
            {
                Buffer.BlockCopy(p, 0, buf, pos, p.Length);
                pos += p.Length;
            }
        }

        private static byte[] ToBytes(object a, int index)
        {
            var s = a as string;
            if (s != null) return ArgumentText.Utf8(s, index);
            var b = a as byte[];
            if (b != null) return b;
            if (a is ArraySegment<byte>)
            {
                var seg = (ArraySegment<byte>)a;
                var c = new byte[seg.Count];
                if (seg.Count > 0) Buffer.BlockCopy(seg.Array, seg.Offset, c, 0, seg.Count);
                return c;
            }
            if (a is double) return Encoding.ASCII.GetBytes(ArgumentText.Double((double)a, index));
            if (a is float) return Encoding.ASCII.GetBytes(ArgumentText.Single((float)a, index));
            if (a is int || a is long || a is short || a is sbyte || a is byte || a is ushort || a is uint || a is ulong || a is decimal)
                return Encoding.ASCII.GetBytes(((IFormattable)a).ToString(null, CultureInfo.InvariantCulture));
            if (a is CancellationToken)
                throw new ArgumentException("pass the CancellationToken first: ExecuteAsync(token, \"GET\", key)", "args");
            throw new ArgumentException("argument " + index + " has unsupported type " + (a == null ? "null" : a.GetType().Name) +
                " (use string, byte[], ArraySegment<byte> or a number)", "args");
        }
    }
}
