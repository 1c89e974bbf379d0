// The fencing proxy over sr_proxy_start / sr_proxy_close_into: a loopback (or Unix socket)
// listener in this process that any Redis client, unchanged (StackExchange.Redis under SignalR
// or CAP), connects to as if to one standalone Redis, while the core follows the primary through
// Sentinel behind it. The close completes through a host mailbox on the sr-dotnet-host thread,
// as every other completion of this binding does.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.Net;
using System.Net.Sockets;
using System.Runtime.InteropServices;
using System.Text;
using System.Text.RegularExpressions;
using System.Threading;
using System.Threading.Tasks;

namespace SentinelRecovery
{
    internal static unsafe partial class Native
    {
        /// <summary><c>SR_PROXY_DEFAULT_GRACE_MS</c>: the grace a close gives replies in flight when
        /// the caller names none.</summary>
        internal const ulong SR_PROXY_DEFAULT_GRACE_MS = 5000;

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_proxy_start(byte* url, sr_option_t* options, UIntPtr optionsLen,
            out ProxyHandle proxy, out IntPtr error);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr sr_proxy_address(ProxyHandle proxy);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_proxy_stats(ProxyHandle proxy, out IntPtr json, out IntPtr error);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_proxy_close_into(ProxyHandle proxy, ulong graceMs, IntPtr mailbox, ulong opId);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_proxy_close_blocking(ProxyHandle proxy, ulong graceMs, out IntPtr error);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void sr_proxy_free(IntPtr proxy);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void sr_string_free(IntPtr s);
    }

    /// <summary>The native proxy. <see cref="ReleaseHandle"/> frees it (<c>sr_proxy_free</c>), which
    /// closes a proxy still open without waiting and without a grace; it runs on a host thread (the
    /// caller of Dispose, or the finalizer thread), never on a core thread.</summary>
    internal sealed class ProxyHandle : SafeHandle
    {
        private ProxyHandle() : base(IntPtr.Zero, true) { }

        public override bool IsInvalid { get { return handle == IntPtr.Zero; } }

        protected override bool ReleaseHandle()
        {
            Native.sr_proxy_free(handle);
            return true;
        }
    }

    /// <summary>
    /// A fencing RESP proxy in this process: a listener on loopback (or a Unix socket) that any
    /// Redis client connects to, unchanged, as if to one standalone Redis, while the library follows
    /// the primary through Sentinel behind it on its own threads. It is how clients that take no
    /// adapter get the library's failover behaviour: StackExchange.Redis multiplexers built by
    /// SignalR's <c>AddStackExchangeRedis</c> or CAP get <see cref="ConfigurationString"/>, and their
    /// own Sentinel code (which blocks pool threads) is never used.
    /// <para>Each client connection is a session with its own connection to the verified primary,
    /// so MULTI/EXEC, WATCH, blocking commands, pub/sub, SELECT, HELLO and the client's own AUTH keep
    /// their meaning. From the moment a sentinel starts promoting a replica nothing more is written
    /// to the old primary: requests wait (up to <c>hold_ms</c>); a write's reply read from a primary
    /// being demoted reaches the client as an error beginning with <c>UNCERTAIN</c> (it may or may
    /// not have been applied), never as a success; a request that found no primary in time gets
    /// <c>FENCED</c> (not sent). At the switch every session moves to the new primary with its
    /// state replayed. Nothing that may have reached a server is sent again. A command already on
    /// the wire to a primary being demoted cannot be recalled, and pub/sub is at-most-once across
    /// a move.</para>
    /// Thread-safe. Close it with <see cref="CloseAsync"/> (a grace for replies in flight) or
    /// <see cref="Dispose"/> (at once); a finalizer closes it otherwise.
    /// </summary>
    public sealed class SentinelProxy : IDisposable
    {
        private static readonly object MailboxGate = new object();
        /// <summary>Where closes complete (made on first use, kept for the process).</summary>
        private static HostMailbox _mailbox;

        private readonly ProxyHandle _handle;
        private readonly object _gate = new object();
        private Task _closed;
        private int _disposed;

        private SentinelProxy(ProxyHandle handle)
        {
            _handle = handle;
            Address = Native.Utf8(Native.sr_proxy_address(handle));
            EndPoint = ParseEndPoint(Address);
            var unix = EndPoint as UnixSocketEndPoint;
            ConfigurationString = (unix != null ? "!" + unix.Path : Address) + ",abortConnect=false";
        }

        private static HostMailbox Mailbox
        {
            get
            {
                lock (MailboxGate) return _mailbox ?? (_mailbox = HostMailbox.Create(null, 1));
            }
        }

        /// <summary>
        /// Starts a proxy and returns it once it accepts connections; it never waits for discovery
        /// (sessions wait for the first verified primary within <c>hold_ms</c>). The proxy and its
        /// sessions run on the library's threads; one client (one shared sentinel monitor) serves
        /// every session.
        /// </summary>
        /// <param name="url">A <c>redis+sentinel://</c> URL, as for <see cref="SentinelClient.Open(string, IDictionary{string, string})"/>.</param>
        /// <param name="options">The proxy's own options and, for any other key, the client's (as the
        /// URL's query keys), or null. The proxy's: <c>listen</c> (<c>IP:PORT</c>, port 0 for a free
        /// one, or <c>unix:PATH</c>; default <c>127.0.0.1:0</c>; a non-loopback address needs
        /// <c>allow_remote</c>), <c>hold_ms</c> (default the URL's <c>command_timeout_ms</c>),
        /// <c>max_clients</c> (10000), <c>idle_timeout_ms</c> (0: never), <c>max_request_bytes</c>
        /// (512 MiB), <c>route</c> (<c>primary</c> or <c>read</c>), <c>lend_credentials</c> (off: each
        /// client authenticates itself with its own AUTH), <c>allow_remote</c> (off),
        /// <c>unix_mode</c> (octal, <c>600</c>).</param>
        /// <returns>The proxy, listening.</returns>
        /// <exception cref="ConfigException">An invalid URL or option (the message names it, never a
        /// password), or an address that could not be bound.</exception>
        public static unsafe SentinelProxy Start(string url, IDictionary<string, string> options = null)
        {
            var packed = NativeOptions.Pack(url, options);
            int nopt = packed.Count;
            var opts = new Native.sr_option_t[Math.Max(nopt, 1)];
            ProxyHandle handle;
            IntPtr err;
            int rc;
            fixed (byte* b = packed.Buffer)
            fixed (Native.sr_option_t* o = opts)
            {
                packed.Fill(b, o);
                rc = Native.sr_proxy_start(b, nopt == 0 ? null : o, (UIntPtr)(uint)nopt, out handle, out err);
            }
            packed.Clear();
            if (rc != Native.SR_OK)
            {
                if (handle != null) handle.Dispose();
                throw SentinelRecoveryException.TakeNative(rc, err);
            }
            try
            {
                return new SentinelProxy(handle);
            }
            catch
            {
                handle.Dispose();
                throw;
            }
        }

        /// <summary>
        /// <see cref="Start"/> as a task, for code written against <see cref="SentinelClient.ConnectAsync(string, IDictionary{string, string}, CancellationToken)"/>:
        /// binding the listener is all the work, so the task is already complete when it is
        /// returned; nothing waits for discovery and no thread blocks.
        /// </summary>
        /// <param name="url">As for <see cref="Start"/>.</param>
        /// <param name="options">As for <see cref="Start"/>.</param>
        /// <returns>The proxy, listening.</returns>
        /// <exception cref="ConfigException">Thrown synchronously for an invalid URL or option, or an
        /// address that could not be bound.</exception>
        public static Task<SentinelProxy> StartAsync(string url, IDictionary<string, string> options = null)
        {
            return Task.FromResult(Start(url, options));
        }

        /// <summary>Where the proxy listens, as the library writes it: <c>127.0.0.1:PORT</c>,
        /// <c>[::1]:PORT</c> (the port the system picked for port 0), or <c>unix:PATH</c>.</summary>
        public string Address { get; private set; }

        /// <summary>Where the proxy listens: an <see cref="IPEndPoint"/> for TCP, a
        /// <see cref="UnixSocketEndPoint"/> for a Unix socket (<c>UnixDomainSocketEndPoint</c> is not
        /// part of netstandard2.0, which this assembly targets; <see cref="UnixSocketEndPoint"/>
        /// serializes to the same socket address, so <c>Socket.Connect</c> takes it).</summary>
        public EndPoint EndPoint { get; private set; }

        /// <summary>
        /// A StackExchange.Redis configuration string for this proxy:
        /// <c>127.0.0.1:PORT,abortConnect=false</c> (for a Unix socket <c>!PATH,abortConnect=false</c>,
        /// the form StackExchange.Redis reads as a Unix socket on .NET Core 3.0 or later). To the
        /// multiplexer the proxy is one standalone server, so it needs no proxy mode: the default,
        /// <c>Proxy.None</c>, is right, and the string leaves it unset. <c>abortConnect=false</c>
        /// lets the multiplexer be created, and keep retrying, while no primary is reachable yet.
        /// Append your own options (<c>password=...</c>, <c>ssl</c> is not used between the
        /// multiplexer and the proxy) after a comma.
        /// </summary>
        public string ConfigurationString { get; private set; }

        /// <summary>The proxy's counters now.</summary>
        /// <exception cref="ClientClosedException">Once a close began.</exception>
        public ProxyStats Stats
        {
            get
            {
                IntPtr json, err;
                int rc;
                try
                {
                    rc = Native.sr_proxy_stats(_handle, out json, out err);
                }
                catch (ObjectDisposedException)
                {
                    throw new ClientClosedException("the proxy was disposed");
                }
                if (rc != Native.SR_OK) throw SentinelRecoveryException.TakeNative(rc, err);
                try
                {
                    return new ProxyStats(Native.Utf8(json));
                }
                finally
                {
                    Native.sr_string_free(json);
                }
            }
        }

        /// <summary>
        /// Closes the proxy: it stops accepting, lets replies in flight reach their clients for up
        /// to <paramref name="grace"/> (default 5 s), then closes every session and the proxy's
        /// client (a Unix socket's file is removed). The task completes, through the
        /// <c>sr-dotnet-host</c> thread and never on a library thread, once all that is done; no
        /// thread blocks meanwhile. Calling it again (or after <see cref="Dispose"/>) returns the
        /// first close's task, or a completed one. (There is no <c>IAsyncDisposable</c>: C# 7.2 on
        /// Mono has neither the interface nor <c>await using</c>; await this, then dispose.)
        /// </summary>
        /// <param name="grace">How long replies in flight may take; <see cref="TimeSpan.Zero"/> for
        /// none; null for the default (5 s).</param>
        /// <exception cref="ArgumentOutOfRangeException">A negative grace.</exception>
        public Task CloseAsync(TimeSpan? grace = null)
        {
            ulong graceMs = GraceMs(grace);
            lock (_gate)
            {
                if (_closed != null) return _closed;
                var op = new PendingOp<bool>(d => true);
                var mailbox = Mailbox;
                ulong id = mailbox.Register(op);
                int rc;
                try
                {
                    rc = Native.sr_proxy_close_into(_handle, graceMs, mailbox.Pointer, id);
                }
                catch (ObjectDisposedException)
                {
                    rc = (int)ErrorCode.Closed;
                }
                if (rc != Native.SR_OK)
                {
                    // Not begun: no completion will come. Closed already (Dispose) is a success.
                    mailbox.Unregister(id);
                    _closed = rc == (int)ErrorCode.Closed
                        ? Task.FromResult(true)
                        : SentinelClient.FaultedOf<bool>(SentinelRecoveryException.Create((ErrorCode)rc,
                            Native.Utf8(Native.sr_error_message(rc))));
                    return _closed;
                }
                _closed = op.Started(CancellationToken.None, IntPtr.Zero);
                return _closed;
            }
        }

        /// <summary>Closes the proxy at once, without a grace (replies still in flight are cut
        /// off; use <see cref="CloseAsync"/> first to give them time), blocking the calling thread
        /// only until every session is closed and the listener's address is free, then releases
        /// it. A close already under way is not waited for. Idempotent.</summary>
        public void Dispose()
        {
            if (Interlocked.Exchange(ref _disposed, 1) != 0) return;
            try
            {
                IntPtr err;
                Native.sr_proxy_close_blocking(_handle, 0, out err);
                if (err != IntPtr.Zero) Native.sr_error_free(err);
            }
            catch (ObjectDisposedException) { }
            _handle.Dispose();
        }

        /// <summary>The address.</summary>
        public override string ToString() { return Address; }

        private static ulong GraceMs(TimeSpan? grace)
        {
            if (!grace.HasValue) return Native.SR_PROXY_DEFAULT_GRACE_MS;
            if (grace.Value < TimeSpan.Zero) throw new ArgumentOutOfRangeException("grace", "a close's grace can't be negative");
            return (ulong)Math.Ceiling(grace.Value.TotalMilliseconds);
        }

        /// <summary>The library's address text as an endpoint.</summary>
        internal static EndPoint ParseEndPoint(string address)
        {
            const string unix = "unix:";
            if (address.StartsWith(unix, StringComparison.Ordinal)) return new UnixSocketEndPoint(address.Substring(unix.Length));
            int colon = address.LastIndexOf(':');
            string host = address.Substring(0, colon);
            if (host.StartsWith("[", StringComparison.Ordinal) && host.EndsWith("]", StringComparison.Ordinal))
                host = host.Substring(1, host.Length - 2);
            return new IPEndPoint(IPAddress.Parse(host), int.Parse(address.Substring(colon + 1), NumberStyles.None, CultureInfo.InvariantCulture));
        }
    }

    /// <summary>A snapshot of a <see cref="SentinelProxy"/>'s counters. Every count but
    /// <see cref="SessionsOpen"/> only grows.</summary>
    public sealed class ProxyStats
    {
        private static readonly Regex Field = new Regex("\"([a-z_]+)\":(-?[0-9.eE+-]+)", RegexOptions.CultureInvariant);
        private readonly Dictionary<string, double> _fields = new Dictionary<string, double>();

        internal ProxyStats(string json)
        {
            Json = json;
            foreach (Match m in Field.Matches(json))
                _fields[m.Groups[1].Value] = double.Parse(m.Groups[2].Value, NumberStyles.Float, CultureInfo.InvariantCulture);
        }

        private long Count(string name)
        {
            double v;
            return _fields.TryGetValue(name, out v) ? (long)v : 0;
        }

        /// <summary>The counters as the library wrote them, one JSON object (later versions may add
        /// fields).</summary>
        public string Json { get; private set; }
        /// <summary>Client connections open now.</summary>
        public long SessionsOpen { get { return Count("sessions_open"); } }
        /// <summary>Client connections accepted since the start.</summary>
        public long SessionsAccepted { get { return Count("sessions_accepted"); } }
        /// <summary>Client connections refused past <c>max_clients</c>.</summary>
        public long SessionsRefused { get { return Count("sessions_refused"); } }
        /// <summary>Requests written to a data node.</summary>
        public long CommandsForwarded { get { return Count("commands_forwarded"); } }
        /// <summary>Requests that had to wait for a primary (a promotion under way, none known yet).</summary>
        public long CommandsHeld { get { return Count("commands_held"); } }
        /// <summary>The time those requests waited, summed.</summary>
        public TimeSpan Held
        {
            get
            {
                double s;
                return TimeSpan.FromSeconds(_fields.TryGetValue("held_seconds", out s) ? s : 0);
            }
        }
        /// <summary>Held requests answered <c>FENCED</c> (not sent): no primary within <c>hold_ms</c>.</summary>
        public long HeldExpired { get { return Count("held_expired"); } }
        /// <summary>Replies read from a primary being demoted that were turned into <c>UNCERTAIN</c> errors.</summary>
        public long FencedReplies { get { return Count("fenced_replies"); } }
        /// <summary>Writes answered <c>NOTREPLICATED</c> (URL option <c>wait_replicas</c>).</summary>
        public long NotReplicated { get { return Count("not_replicated"); } }
        /// <summary>Sessions moved to a new primary with their state replayed.</summary>
        public long Moves { get { return Count("moves"); } }
        /// <summary>Sessions closed at a move because their state could not follow (MONITOR, CLIENT
        /// TRACKING, a reply still pending past the hold bound).</summary>
        public long SessionsClosedAtMove { get { return Count("sessions_closed_at_move"); } }
        /// <summary>Primary changes seen.</summary>
        public long PrimaryChanges { get { return Count("primary_changes"); } }
        /// <summary>Upstream connections that failed to open or broke.</summary>
        public long UpstreamErrors { get { return Count("upstream_errors"); } }
        /// <summary>Requests that were not valid RESP (their session was closed).</summary>
        public long MalformedRequests { get { return Count("malformed_requests"); } }

        /// <summary>The JSON.</summary>
        public override string ToString() { return Json; }
    }

    /// <summary>
    /// A Unix domain socket as an <see cref="System.Net.EndPoint"/>, for netstandard2.0, which has no
    /// <c>UnixDomainSocketEndPoint</c>: it serializes to the <c>sockaddr_un</c> of
    /// <see cref="Path"/>, so <c>new Socket(AddressFamily.Unix, SocketType.Stream,
    /// ProtocolType.Unspecified).Connect(endPoint)</c> reaches it on Mono and .NET alike. On .NET
    /// Core 3.0 or later, <c>new UnixDomainSocketEndPoint(endPoint.Path)</c> is the framework's own.
    /// </summary>
    public sealed class UnixSocketEndPoint : EndPoint
    {
        /// <summary>The socket's path.</summary>
        /// <param name="path">A file system path, at most 107 bytes of UTF-8 (the size of <c>sun_path</c>).</param>
        public UnixSocketEndPoint(string path)
        {
            if (path == null) throw new ArgumentNullException("path");
            if (path.Length == 0 || Encoding.UTF8.GetByteCount(path) > 107)
                throw new ArgumentException("a Unix socket path has 1 to 107 bytes", "path");
            Path = path;
        }

        /// <summary>The socket's path.</summary>
        public string Path { get; private set; }

        /// <summary><see cref="AddressFamily.Unix"/>.</summary>
        public override AddressFamily AddressFamily { get { return AddressFamily.Unix; } }

        /// <summary>The <c>sockaddr_un</c>: the family, then the path's UTF-8 bytes and a NUL.</summary>
        public override SocketAddress Serialize()
        {
            var bytes = Encoding.UTF8.GetBytes(Path);
            var address = new SocketAddress(AddressFamily.Unix, 2 + bytes.Length + 1);
            for (int i = 0; i < bytes.Length; i++) address[2 + i] = bytes[i];
            address[2 + bytes.Length] = 0;
            return address;
        }

        /// <summary>The endpoint of a <c>sockaddr_un</c>.</summary>
        public override EndPoint Create(SocketAddress socketAddress)
        {
            if (socketAddress == null) throw new ArgumentNullException("socketAddress");
            var bytes = new List<byte>();
            for (int i = 2; i < socketAddress.Size && socketAddress[i] != 0; i++) bytes.Add(socketAddress[i]);
            return new UnixSocketEndPoint(Encoding.UTF8.GetString(bytes.ToArray()));
        }

        /// <summary>Equal paths are equal endpoints.</summary>
        public override bool Equals(object obj)
        {
            var other = obj as UnixSocketEndPoint;
            return other != null && other.Path == Path;
        }

        /// <summary>The path's hash.</summary>
        public override int GetHashCode() { return Path.GetHashCode(); }

        /// <summary>The path.</summary>
        public override string ToString() { return Path; }
    }
}
