// NUnit 2.6 (Debian) on Mono, against real Redis + Sentinel topologies from `sr-topology`.
using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Linq;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using NUnit.Framework;

namespace SentinelRecovery.Tests
{
    /// <summary>Everything that does not disturb the topology, on one shared topology.</summary>
    [TestFixture]
    public class ClientTests
    {
        private TopologyProcess _topo;
        private const string Unreachable = "redis+sentinel://127.0.0.1:1/mymaster";

        [TestFixtureSetUp]
        public void Up() { _topo = new TopologyProcess(); }

        [TestFixtureTearDown]
        public void Down() { if (_topo != null) _topo.Dispose(); }

        [Test]
        public async Task ConnectReportsTheTopology()
        {
            Assert.That(SentinelClient.NativeVersion, Is.StringMatching(@"^\d+\.\d+\.\d+"));
            using (var c = await Wait.Within(SentinelClient.ConnectAsync(_topo.Url), 15000, "ConnectAsync"))
            {
                var t = c.GetTopology();
                Assert.That(t.Healthy, Is.True);
                Assert.That(t.Service, Is.EqualTo(_topo.Service));
                Assert.That(t.Primary, Is.EqualTo(new NodeAddress("127.0.0.1", _topo.PrimaryPort)));
                CollectionAssert.IsSubsetOf(_topo.SentinelPorts, t.Sentinels.Select(s => s.Port).ToList());
                Wait.Until(() => c.GetTopology().Replicas.Count == _topo.ReplicaPorts.Count, 10000, "both replicas reported");
                Assert.That(c.GetTopology().Replicas.Select(r => r.Port), Is.EquivalentTo(_topo.ReplicaPorts));
                var ready = await Wait.Within(c.WaitReadyAsync(), 5000, "WaitReadyAsync");
                Assert.That(ready.Primary.Port, Is.EqualTo(_topo.PrimaryPort));
            }
        }

        [Test]
        public async Task ExecuteMapsRepliesOfEveryShape()
        {
            using (var c = await SentinelClient.ConnectAsync(_topo.Url))
            {
                var key = "dotnet:" + Guid.NewGuid().ToString("N");
                Assert.That((await c.ExecuteAsync("SET", key, "héllo")).AsString(), Is.EqualTo("OK"));
                var got = await c.ExecuteAsync("GET", key);
                Assert.That(got.Type, Is.EqualTo(ReplyType.Bulk));
                Assert.That(got.AsString(), Is.EqualTo("héllo"));

                var bin = new byte[] { 0, 1, 0xff, 0x0d, 0x0a, 0 };
                await c.ExecuteAsync("SET", key + ":bin", bin);
                Assert.That((await c.ExecuteAsync("GET", key + ":bin")).AsBytes(), Is.EqualTo(bin));
                await c.ExecuteAsync("SET", key + ":seg", new ArraySegment<byte>(bin, 2, 3));
                Assert.That((await c.ExecuteAsync("GET", key + ":seg")).AsBytes(), Is.EqualTo(new byte[] { 0xff, 0x0d, 0x0a }));

                Assert.That((await c.ExecuteAsync("GET", key + ":missing")).IsNull, Is.True);
                var n = await c.ExecuteAsync("INCRBY", key + ":n", 41L);
                Assert.That(n.Type, Is.EqualTo(ReplyType.Integer));
                Assert.That(n.AsInt64(), Is.EqualTo(41));
                Assert.That((await c.ExecuteAsync("INCRBYFLOAT", key + ":f", 2.5)).AsDouble(), Is.EqualTo(2.5));

                var pong = await c.ExecuteAsync("PING");
                Assert.That(pong.Type, Is.EqualTo(ReplyType.Simple));
                Assert.That(pong.AsString(), Is.EqualTo("PONG"));

                await c.ExecuteAsync("RPUSH", key + ":l", "a", "b", "c");
                var l = await c.ExecuteAsync("LRANGE", key + ":l", 0, -1);
                Assert.That(l.Type, Is.EqualTo(ReplyType.Array));
                Assert.That(l.Elements.Select(e => e.AsString()), Is.EqualTo(new[] { "a", "b", "c" }));
                Assert.That(l.ToObject(), Is.InstanceOf<object[]>());

                await c.ExecuteAsync("HSET", key + ":h", "f1", "v1", "f2", "v2");
                var h = await c.ExecuteAsync("HGETALL", key + ":h"); // RESP3: a map
                Assert.That(h.Type, Is.EqualTo(ReplyType.Map));
                Assert.That(h.Entries.ToDictionary(e => e.Key.AsString(), e => e.Value.AsString()),
                    Is.EquivalentTo(new Dictionary<string, string> { { "f1", "v1" }, { "f2", "v2" } }));

                await c.ExecuteAsync("ZADD", key + ":z", 1.5, "m");
                var score = await c.ExecuteAsync("ZSCORE", key + ":z", "m");
                Assert.That(score.Type, Is.EqualTo(ReplyType.Double));
                Assert.That(score.AsDouble(), Is.EqualTo(1.5));

                await c.ExecuteAsync("SADD", key + ":s", "x");
                Assert.That((await c.ExecuteAsync("SMEMBERS", key + ":s")).Type, Is.EqualTo(ReplyType.Set));

                // the blocking variant, on this (test) thread only
                Assert.That(c.Execute("GET", key).AsString(), Is.EqualTo("héllo"));
            }
        }

        [Test]
        public void ArgumentsAreCheckedBeforeSending()
        {
            using (var c = SentinelClient.Open(Unreachable))
            {
                Assert.Throws<ArgumentException>(() => c.ExecuteAsync());
                Assert.Throws<ArgumentException>(() => c.ExecuteAsync("SET", "k", new object()));
                Assert.Throws<ArgumentException>(() => c.ExecuteAsync("GET", "k", CancellationToken.None));
                Assert.Throws<ArgumentNullException>(() => SentinelClient.Open(null));
            }
        }

        [Test]
        public async Task ContinuationsAndEventsNeverRunOnCoreThreads()
        {
            using (var c = await SentinelClient.ConnectAsync(_topo.Url))
            {
                var events = new BlockingCollection<string>();
                c.TopologyEvent += (s, e) => events.Add(Thread.CurrentThread.Name);
                // slow enough that the continuation is attached before the reply arrives
                var t = c.ExecuteAsync("DEBUG", "SLEEP", "0.2");
                var where = await t.ContinueWith(_ => Thread.CurrentThread.IsThreadPoolThread,
                    TaskContinuationOptions.ExecuteSynchronously);
                Assert.That(t.Result.AsString(), Is.EqualTo("OK"));
                Assert.That(where, Is.True, "continuation ran on a core thread instead of the pool");

                // an event: a client of an unknown service keeps failing discovery
                using (var bad = SentinelClient.Open(_topo.Url.Replace("/" + _topo.Service, "/nosuch-events")))
                {
                    var failed = new BlockingCollection<DiscoveryFailedEventArgs>();
                    var threads = new BlockingCollection<string>();
                    bad.DiscoveryFailed += (s, e) => { failed.Add(e); threads.Add(Thread.CurrentThread.Name); };
                    DiscoveryFailedEventArgs ev;
                    Assert.That(failed.TryTake(out ev, 15000), Is.True, "no discovery_failed event");
                    Assert.That(ev.Kind, Is.EqualTo(EventKind.DiscoveryFailed));
                    Assert.That(ev.KindName, Is.EqualTo("discovery_failed"));
                    Assert.That(ev.Service, Is.EqualTo("nosuch-events"));
                    Assert.That(ev.Error, Is.InstanceOf<ServiceUnknownException>());
                    Assert.That(ev.Json, Is.StringContaining("\"discovery_failed\""));
                    Assert.That((DateTimeOffset.UtcNow - ev.At).TotalMinutes, Is.LessThan(5));
                    Assert.That(threads.Take(), Is.EqualTo("sr-dotnet-events"));
                }
            }
        }

        [Test]
        public void HandlerExceptionsDoNotStopLaterEvents()
        {
            using (var bad = SentinelClient.Open(_topo.Url.Replace("/" + _topo.Service, "/nosuch-throw")))
            {
                int calls = 0;
                var after = new BlockingCollection<TopologyEventArgs>();
                bad.DiscoveryFailed += (s, e) => { Interlocked.Increment(ref calls); throw new InvalidOperationException("handler bug"); };
                bad.TopologyEvent += (s, e) => after.Add(e);
                TopologyEventArgs e1, e2;
                Assert.That(after.TryTake(out e1, 15000) && after.TryTake(out e2, 15000), Is.True, "events stopped after a handler threw");
                Assert.That(Volatile.Read(ref calls), Is.GreaterThanOrEqualTo(1));
            }
        }

        [Test]
        public async Task CancellationCancelsTheTaskAndDiscardsTheReply()
        {
            using (var c = await SentinelClient.ConnectAsync(_topo.Url))
            {
                var cts = new CancellationTokenSource();
                var slow = c.ExecuteAsync(cts.Token, "DEBUG", "SLEEP", "0.5");
                cts.CancelAfter(50);
                var e = Wait.Settles(slow, 2000, "cancelled command");
                Assert.That(slow.IsCanceled, Is.True, "expected a cancelled task, got " + e);
                // the client is fine afterwards (the late reply was discarded)
                Assert.That((await Wait.Within(c.ExecuteAsync("PING"), 5000, "PING after cancel")).AsString(), Is.EqualTo("PONG"));

                var pre = new CancellationTokenSource();
                pre.Cancel();
                Assert.That(c.ExecuteAsync(pre.Token, "PING").IsCanceled, Is.True);
            }

            // a command waiting for a primary that never comes
            using (var c = SentinelClient.Open(Unreachable))
            {
                var cts = new CancellationTokenSource();
                var t = c.ExecuteAsync(cts.Token, "GET", "k");
                cts.Cancel();
                Wait.Settles(t, 1000, "command cancelled while queued");
                Assert.That(t.IsCanceled, Is.True);
            }
        }

        [Test]
        public async Task ElevenClientsInOneProcess()
        {
            var key = "dotnet:eleven:" + Guid.NewGuid().ToString("N");
            var clients = await Wait.Within(Task.WhenAll(Enumerable.Range(0, 11).Select(_ => SentinelClient.ConnectAsync(_topo.Url))),
                20000, "11 ConnectAsync");
            try
            {
                var writes = clients.SelectMany(c => Enumerable.Range(0, 40).Select(_ => c.ExecuteAsync("INCR", key))).ToArray();
                await Wait.Within(Task.WhenAll(writes), 20000, "440 INCRs over 11 clients");
                Assert.That((await clients[0].ExecuteAsync("GET", key)).AsInt64(), Is.EqualTo(11 * 40));
                Assert.That(clients.Select(c => c.GetTopology().Primary.Port).Distinct(), Is.EqualTo(new[] { _topo.PrimaryPort }));
            }
            finally
            {
                foreach (var c in clients) c.Dispose();
            }
        }

        // ---- errors: one test per class that a real topology (or none) can produce ----

        [Test]
        public void ConfigErrorsNameThePartAndNeverThePassword()
        {
            var e = Assert.Throws<ConfigException>(() => SentinelClient.Open("http://127.0.0.1/m"));
            Assert.That(e.Code, Is.EqualTo(ErrorCode.Config));
            Assert.That(e.CodeName, Is.EqualTo("config"));
            e = Assert.Throws<ConfigException>(() => SentinelClient.Open("redis+sentinel://bob:s3cretpw@127.0.0.1:1/m",
                new Dictionary<string, string> { { "no_such_option", "1" } }));
            Assert.That(e.Message, Is.StringContaining("no_such_option"));
            Assert.That(e.Message, Is.Not.StringContaining("s3cretpw"));
            e = Assert.Throws<ConfigException>(() => SentinelClient.Open(Unreachable,
                new Dictionary<string, string> { { "sentinel_password", "s3cretpw" }, { "command_timeout_ms", "-5" } }));
            Assert.That(e.Message, Is.StringContaining("command_timeout_ms"));
            Assert.That(e.Message, Is.Not.StringContaining("s3cretpw"));
            Assert.That(SentinelRecoveryException.Create(ErrorCode.Config, "x"), Is.InstanceOf<ConfigException>());
        }

        [Test]
        public void SentinelsUnreachable()
        {
            var e = Wait.Fails(SentinelClient.ConnectAsync(Unreachable), 10000, "ConnectAsync to a closed port");
            Assert.That(e, Is.InstanceOf<SentinelsUnreachableException>());
            Assert.That(((SentinelRecoveryException)e).Code, Is.EqualTo(ErrorCode.SentinelsUnreachable));
        }

        [Test]
        public void ServiceUnknown()
        {
            var e = Wait.Fails(SentinelClient.ConnectAsync(_topo.Url.Replace("/" + _topo.Service, "/nosuch")), 10000, "ConnectAsync to an unknown service");
            Assert.That(e, Is.InstanceOf<ServiceUnknownException>());
        }

        [Test]
        public void AuthWhenThePrimaryRefusesTheCredentials()
        {
            // The sentinels report a primary, but verifying it (HELLO with a password it does not
            // know) fails: a round in which every candidate failed on credentials reports auth.
            var url = _topo.Url.Replace("redis+sentinel://", "redis+sentinel://bob:s3cretpw@");
            var e = Wait.Fails(SentinelClient.ConnectAsync(url), 15000, "ConnectAsync with wrong credentials");
            Assert.That(e, Is.InstanceOf<AuthException>());
            Assert.That(e.Message, Is.StringContaining("WRONGPASS"));
            Assert.That(e.Message, Is.Not.StringContaining("s3cretpw"));
        }

        [Test]
        public async Task ServerErrorsCarryTheServerCode()
        {
            using (var c = await SentinelClient.ConnectAsync(_topo.Url))
            {
                var key = "dotnet:wrongtype:" + Guid.NewGuid().ToString("N");
                await c.ExecuteAsync("RPUSH", key, "x");
                var e = Wait.Fails(c.ExecuteAsync("INCR", key), 5000, "INCR on a list");
                Assert.That(e, Is.InstanceOf<ServerException>());
                Assert.That(((ServerException)e).ServerCode, Is.EqualTo("WRONGTYPE"));
                Assert.That(((ServerException)e).CodeName, Is.EqualTo("server"));
                var e2 = Assert.Throws<ServerException>(() => c.Execute("NOSUCHCOMMAND"));
                Assert.That(e2.ServerCode, Is.EqualTo("ERR"));
            }
        }

        [Test]
        public void TimeoutAndQueueFullWhileNoPrimaryIsKnown()
        {
            using (var c = SentinelClient.Open(Unreachable,
                new Dictionary<string, string> { { "command_timeout_ms", "300" }, { "queue_size", "1" } }))
            {
                // queue_size 1: of several commands waiting for a primary, one holds the place
                // (and times out), the others are refused at once.
                var waiting = Enumerable.Range(0, 4).Select(i => c.ExecuteAsync("GET", "k" + i)).ToArray();
                var errors = waiting.Select(t => Wait.Fails(t, 5000, "queued command")).ToList();
                Assert.That(errors, Has.Some.InstanceOf<QueueFullException>());
                Assert.That(errors, Has.Some.InstanceOf<SentinelTimeoutException>());
                Assert.That(errors, Has.All.InstanceOf<QueueFullException>().Or.InstanceOf<SentinelTimeoutException>());
                Assert.Throws<SentinelTimeoutException>(() => c.Execute("GET", "c"));
            }
        }

        [Test]
        public async Task ClosedAfterAndDuringDispose()
        {
            var c = SentinelClient.Open(Unreachable);
            var waiting = c.ExecuteAsync("GET", "k"); // queued: no primary
            var ready = c.WaitReadyAsync();
            c.Dispose();
            Assert.That(Wait.Fails(waiting, 2000, "command in flight at Dispose"), Is.InstanceOf<ClientClosedException>());
            Assert.That(Wait.Fails(c.ExecuteAsync("GET", "k"), 1000, "command after Dispose"), Is.InstanceOf<ClientClosedException>());
            Assert.Throws<ClientClosedException>(() => c.GetTopology());
            Assert.Throws<ClientClosedException>(() => c.Execute("PING"));
            Assert.That(Wait.Fails(ready, 5000, "WaitReadyAsync across Dispose"), Is.InstanceOf<SentinelRecoveryException>());
            c.Dispose(); // twice is fine

            var ok = await SentinelClient.ConnectAsync(_topo.Url);
            ok.Dispose();
            Assert.That(Wait.Fails(ok.ExecuteAsync("PING"), 1000, "PING after Dispose"), Is.InstanceOf<ClientClosedException>());
        }

        [Test]
        public void ConnectCancellation()
        {
            var cts = new CancellationTokenSource();
            cts.Cancel();
            var t = SentinelClient.ConnectAsync(Unreachable, null, cts.Token);
            Wait.Settles(t, 5000, "cancelled ConnectAsync");
            Assert.That(t.IsCanceled, Is.True);
        }

        [Test]
        public void UnreferencedClientsAreFinalized()
        {
            // A client nobody disposes is closed by its SafeHandle's finalizer (on the finalizer
            // thread, a host thread): no crash, no hang.
            for (int i = 0; i < 5; i++) OpenAndForget();
            GC.Collect();
            GC.WaitForPendingFinalizers();
            GC.Collect();
            using (var c = SentinelClient.Open(Unreachable)) Assert.That(c.GetTopology().Healthy, Is.False);
        }

        private void OpenAndForget()
        {
            var c = SentinelClient.Open(Unreachable);
            c.TopologyEvent += (s, e) => { };
            c.ExecuteAsync("GET", "k");
        }
    }
}
