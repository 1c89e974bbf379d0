// The fencing proxy (SentinelProxy) talked to by a plain RESP client over a socket, as any
// Redis client would talk to one standalone server (StackExchange.Redis can't be installed on
// these machines): without a topology (refusals, FENCED, the Unix socket endpoint) and through a
// planned failover on a topology of its own.
using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Net;
using System.Net.Sockets;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using NUnit.Framework;

namespace SentinelRecovery.Tests
{
    /// <summary>An error reply.</summary>
    public sealed class RespError
    {
        public string Message;
        public override string ToString() { return "-" + Message; }
    }

    /// <summary>A minimal RESP2 client on one socket: commands as arrays of bulk strings; replies
    /// as string (simple or bulk), long, null, object[] or <see cref="RespError"/>. Every read and
    /// write is bounded, so a hung proxy fails the test instead of hanging it.</summary>
    public sealed class Resp : IDisposable
    {
        private readonly Socket _socket;
        private readonly BufferedStream _in;
        private readonly NetworkStream _stream;

        public Resp(EndPoint endPoint, int timeoutMs = 20000)
        {
            _socket = new Socket(endPoint.AddressFamily, SocketType.Stream,
                endPoint.AddressFamily == AddressFamily.Unix ? ProtocolType.Unspecified : ProtocolType.Tcp);
            _socket.ReceiveTimeout = timeoutMs;
            _socket.SendTimeout = timeoutMs;
            try
            {
                _socket.Connect(endPoint);
            }
            catch
            {
                _socket.Close();
                throw;
            }
            _stream = new NetworkStream(_socket, true);
            _in = new BufferedStream(_stream);
        }

        public object Call(params string[] args)
        {
            var b = new StringBuilder();
            b.Append('*').Append(args.Length).Append("\r\n");
            foreach (var a in args) b.Append('$').Append(Encoding.UTF8.GetByteCount(a)).Append("\r\n").Append(a).Append("\r\n");
            var bytes = Encoding.UTF8.GetBytes(b.ToString());
            _stream.Write(bytes, 0, bytes.Length);
            return Read();
        }

        private string Line()
        {
            var b = new List<byte>();
            for (;;)
            {
                int c = _in.ReadByte();
                if (c < 0) throw new IOException("the connection was closed");
                if (c == '\n' && b.Count > 0 && b[b.Count - 1] == '\r') return Encoding.UTF8.GetString(b.ToArray(), 0, b.Count - 1);
                b.Add((byte)c);
            }
        }

        private object Read()
        {
            var line = Line();
            var rest = line.Substring(1);
            switch (line[0])
            {
                case '+': return rest;
                case '-': return new RespError { Message = rest };
                case ':': return long.Parse(rest);
                case '$':
                    {
                        int n = int.Parse(rest);
                        if (n < 0) return null;
                        var buf = new byte[n + 2];
                        for (int got = 0; got < buf.Length;)
                        {
                            int r = _in.Read(buf, got, buf.Length - got);
                            if (r <= 0) throw new IOException("the connection was closed");
                            got += r;
                        }
                        return Encoding.UTF8.GetString(buf, 0, n);
                    }
                case '*':
                    {
                        int n = int.Parse(rest);
                        if (n < 0) return null;
                        var items = new object[n];
                        for (int i = 0; i < n; i++) items[i] = Read();
                        return items;
                    }
                default: throw new IOException("not RESP: " + line);
            }
        }

        public void Dispose() { _in.Dispose(); }
    }

    [TestFixture]
    public class ProxyStartTests
    {
        /// <summary>No sentinel answers there: the proxy starts anyway (it never waits for
        /// discovery) and its sessions find no primary.</summary>
        private const string Nowhere = "redis+sentinel://127.0.0.1:1/mymaster";

        [Test]
        public void BadOptionsAreRefusedNamingThem()
        {
            var e = Assert.Throws<ConfigException>(() => SentinelProxy.Start(Nowhere,
                new Dictionary<string, string> { { "listen", "10.0.0.1:0" } }));
            StringAssert.Contains("allow_remote", e.Message);
            e = Assert.Throws<ConfigException>(() => SentinelProxy.StartAsync(Nowhere,
                new Dictionary<string, string> { { "hold_ms", "0" } }));
            StringAssert.Contains("hold_ms", e.Message);
            e = Assert.Throws<ConfigException>(() => SentinelProxy.Start(Nowhere,
                new Dictionary<string, string> { { "command_timeout_ms", "soon" } }));
            StringAssert.Contains("command_timeout_ms", e.Message);
            Assert.Throws<ConfigException>(() => SentinelProxy.Start("http://x/y"));
            Assert.Throws<ArgumentNullException>(() => SentinelProxy.Start(null));
        }

        /// <summary>A TCP proxy: its endpoint and configuration string, a request held past
        /// hold_ms answered FENCED, the stats, and a close that frees the address.</summary>
        [Test]
        public async Task AHeldRequestIsAnsweredFencedAndCloseFreesTheAddress()
        {
            var proxy = await SentinelProxy.StartAsync(Nowhere, new Dictionary<string, string> { { "hold_ms", "300" } });
            try
            {
                var ip = proxy.EndPoint as IPEndPoint;
                Assert.That(ip, Is.Not.Null, "a TCP proxy's endpoint is an IPEndPoint");
                Assert.That(ip.Address, Is.EqualTo(IPAddress.Loopback));
                Assert.That(ip.Port, Is.GreaterThan(0));
                Assert.That(proxy.Address, Is.EqualTo("127.0.0.1:" + ip.Port));
                Assert.That(proxy.ConfigurationString, Is.EqualTo("127.0.0.1:" + ip.Port + ",abortConnect=false"));
                using (var c = new Resp(proxy.EndPoint))
                {
                    var r = c.Call("PING") as RespError;
                    Assert.That(r, Is.Not.Null, "PING with no primary is an error");
                    StringAssert.StartsWith("FENCED", r.Message);
                }
                var stats = proxy.Stats;
                Assert.That(stats.SessionsAccepted, Is.EqualTo(1));
                Assert.That(stats.HeldExpired, Is.EqualTo(1));
                Assert.That(stats.CommandsForwarded, Is.EqualTo(0));
                StringAssert.Contains("\"held_expired\":1", stats.Json);

                var closing = proxy.CloseAsync(TimeSpan.Zero);
                await Wait.Within(closing.ContinueWith(t => t.Exception), 20000, "CloseAsync");
                Assert.That(closing.IsCompleted && !closing.IsFaulted, Is.True, "CloseAsync failed");
                Assert.That(proxy.CloseAsync(), Is.SameAs(closing), "a second close is the first one");
                Assert.Throws<ClientClosedException>(() => { var s = proxy.Stats; });
                Assert.Throws<SocketException>(() => new Resp(proxy.EndPoint).Dispose(), "nothing listens any more");
            }
            finally
            {
                proxy.Dispose();
            }
            proxy.Dispose();
            Assert.That(proxy.CloseAsync().IsCompleted, Is.True, "CloseAsync after Dispose");
        }

        /// <summary>A Unix socket proxy: a UnixSocketEndPoint a Socket connects to, a
        /// StackExchange.Redis-style configuration string, the owner-only file removed by Dispose.</summary>
        [Test]
        public void AUnixSocketProxyIsReachedThroughItsEndPoint()
        {
            var path = Path.Combine(Path.GetTempPath(), "sr-dotnet-proxy-" + Guid.NewGuid().ToString("N").Substring(0, 12) + ".sock");
            using (var proxy = SentinelProxy.Start(Nowhere, new Dictionary<string, string>
                { { "listen", "unix:" + path }, { "hold_ms", "200" } }))
            {
                Assert.That(proxy.Address, Is.EqualTo("unix:" + path));
                var unix = proxy.EndPoint as UnixSocketEndPoint;
                Assert.That(unix, Is.Not.Null);
                Assert.That(unix.Path, Is.EqualTo(path));
                Assert.That(unix.AddressFamily, Is.EqualTo(AddressFamily.Unix));
                Assert.That(unix.Create(unix.Serialize()), Is.EqualTo(unix));
                Assert.That(proxy.ConfigurationString, Is.EqualTo("!" + path + ",abortConnect=false"));
                Assert.That(File.Exists(path), Is.True);
                using (var c = new Resp(proxy.EndPoint))
                {
                    var r = c.Call("PING") as RespError;
                    Assert.That(r, Is.Not.Null);
                    StringAssert.StartsWith("FENCED", r.Message);
                }
                proxy.Dispose();
                Assert.That(File.Exists(path), Is.False, "the socket file outlived Dispose");
            }
        }
    }

    [TestFixture]
    public class ProxyFailoverTests
    {
        private TopologyProcess _topo;

        [TestFixtureSetUp]
        public void Up() { _topo = new TopologyProcess(); }

        [TestFixtureTearDown]
        public void Down() { if (_topo != null) _topo.Dispose(); }

        /// <summary>SET through the proxy, SENTINEL FAILOVER, SET again on the same connection
        /// (its session moved), while a second connection RPUSHes unique values the whole time:
        /// both SETs and every acknowledged RPUSH are on the new primary, each value once, and
        /// none answered FENCED was applied.</summary>
        [Test]
        public async Task SetFailoverAndSetAgainLosesNothing()
        {
            var key = "dotnet:proxy:" + Guid.NewGuid().ToString("N");
            var list = key + ":list";
            var proxy = await SentinelProxy.StartAsync(_topo.Url, new Dictionary<string, string>
                { { "hold_ms", "15000" }, { "command_timeout_ms", "15000" } });
            try
            {
                using (var c = new Resp(proxy.EndPoint))
                {
                    Assert.That(c.Call("SET", key + ":1", "before"), Is.EqualTo("OK"));
                    Assert.That(c.Call("GET", key + ":1"), Is.EqualTo("before"));

                    // The writer: its own connection, reopened when it breaks.
                    var fate = new Dictionary<int, char>(); // 'A' acknowledged, 'F' FENCED/READONLY, 'U' uncertain
                    long acked = 0;
                    var stop = new CancellationTokenSource();
                    var writer = new Thread(() =>
                    {
                        Resp w = null;
                        for (int i = 0; !stop.IsCancellationRequested; i++)
                        {
                            object r;
                            try
                            {
                                if (w == null) w = new Resp(proxy.EndPoint);
                                r = w.Call("RPUSH", list, "v" + i);
                            }
                            catch (Exception e) when (e is IOException || e is SocketException)
                            {
                                if (w != null) w.Dispose();
                                w = null;
                                lock (fate) fate[i] = 'U';
                                Thread.Sleep(10);
                                continue;
                            }
                            var err = r as RespError;
                            lock (fate) fate[i] = err == null ? 'A'
                                : err.Message.StartsWith("FENCED") || err.Message.StartsWith("READONLY") ? 'F' : 'U';
                            if (err == null) Interlocked.Increment(ref acked);
                        }
                        if (w != null) w.Dispose();
                    }) { IsBackground = true, Name = "proxy-writer" };
                    writer.Start();
                    Wait.Until(() => Interlocked.Read(ref acked) > 20, 30000, "writes through the proxy");

                    var old = _topo.ReportedPrimary();
                    _topo.Command("failover");
                    var np = (int)(double)_topo.Command("wait-primary-not " + old + " 60000")["port"];
                    long atSwitch = Interlocked.Read(ref acked);

                    // The same connection: its session followed the primary.
                    Assert.That(c.Call("SET", key + ":2", "after"), Is.EqualTo("OK"), "SET after the failover");
                    Wait.Until(() => Interlocked.Read(ref acked) > atSwitch + 20, 30000, "writes after the switch");
                    stop.Cancel();
                    Assert.That(writer.Join(30000), Is.True, "the writer hung");

                    var stats = proxy.Stats;
                    Console.WriteLine("proxy through a planned failover {0} -> {1}: {2}", old, np, stats);
                    Assert.That(stats.PrimaryChanges, Is.GreaterThanOrEqualTo(1));
                    Assert.That(stats.Moves, Is.GreaterThanOrEqualTo(1));

                    using (var p = new Resp(new IPEndPoint(IPAddress.Loopback, np)))
                    {
                        var role = (object[])p.Call("ROLE");
                        Assert.That(role[0], Is.EqualTo("master"), "the new primary's ROLE");
                        Assert.That(p.Call("GET", key + ":1"), Is.EqualTo("before"));
                        Assert.That(p.Call("GET", key + ":2"), Is.EqualTo("after"));
                        var values = ((object[])p.Call("LRANGE", list, "0", "-1")).Cast<string>().ToList();
                        var seen = values.GroupBy(v => v).ToDictionary(g => g.Key, g => g.Count());
                        int lost = 0, fencedButPresent = 0, ack = 0;
                        lock (fate)
                        {
                            foreach (var kv in fate)
                            {
                                bool present = seen.ContainsKey("v" + kv.Key);
                                if (kv.Value == 'A') { ack++; if (!present) lost++; }
                                if (kv.Value == 'F' && present) fencedButPresent++;
                            }
                        }
                        Console.WriteLine("{0} values on the new primary; acknowledged {1}, lost {2}, fenced but present {3}",
                            values.Count, ack, lost, fencedButPresent);
                        Assert.That(lost, Is.EqualTo(0), "acknowledged writes lost");
                        Assert.That(seen.Values.Where(n => n > 1).Count(), Is.EqualTo(0), "values applied twice");
                        Assert.That(fencedButPresent, Is.EqualTo(0), "writes answered FENCED that were applied");
                    }
                }
                await Wait.Within(proxy.CloseAsync().ContinueWith(t => t.Exception), 20000, "CloseAsync");
            }
            finally
            {
                proxy.Dispose();
            }
        }
    }
}
