// What applications use, against real topologies: pipelines, per-call deadlines, native
// cancellation, transactions (WATCH; EXEC refused after a failover), hints naming the .NET API,
// and core log records reaching the Log hook without secrets.
using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using NUnit.Framework;

namespace SentinelRecovery.Tests
{
    [TestFixture]
    public class AppsTests
    {
        private TopologyProcess _topo;

        [TestFixtureSetUp]
        public void Up() { _topo = new TopologyProcess(); }

        [TestFixtureTearDown]
        public void Down() { _topo.Dispose(); }

        private static SentinelClient Connect(string url)
        {
            var options = new Dictionary<string, string> { { "command_timeout_ms", "10000" } };
            return Wait.Within(SentinelClient.ConnectAsync(url, options), 30000, "connect").GetAwaiter().GetResult();
        }

        private static int Blocked(SentinelClient c)
        {
            return c.Execute("CLIENT", "LIST").AsString().Split('\n').Count(l => l.Contains("cmd=blpop"));
        }

        [Test]
        public void PipelineGivesEachReplyOrErrorInOrder()
        {
            using (var c = Connect(_topo.Url))
            {
                var results = Wait.Within(c.PipelineAsync(new[]
                {
                    new object[] { "SET", "net:p", "1" },
                    new object[] { "INCR", "net:p" },
                    new object[] { "HGET", "net:p", "f" },
                    new object[] { "GET", "net:p" },
                }), 20000, "pipeline").GetAwaiter().GetResult();
                Assert.That(results.Length, Is.EqualTo(4));
                Assert.That(results[0].Reply.AsString(), Is.EqualTo("OK"));
                Assert.That(results[1].Reply.AsInt64(), Is.EqualTo(2));
                Assert.That(results[2].IsError, Is.True);
                Assert.That(results[2].Error, Is.InstanceOf<ServerException>());
                Assert.That(results[3].Reply.AsString(), Is.EqualTo("2"));
                Assert.That(Wait.Within(c.PipelineAsync(new object[0][]), 20000, "empty").GetAwaiter().GetResult().Length, Is.EqualTo(0));
                var refused = Wait.Fails(c.PipelineAsync(new[] { new object[] { "INCR", "net:p" }, new object[] { "BLPOP", "net:l", "1" } }), 20000, "refused");
                Assert.That(refused, Is.InstanceOf<ConfigException>());
                Assert.That(c.Execute("GET", "net:p").AsString(), Is.EqualTo("2"), "nothing of a refused pipeline was sent");
            }
        }

        [Test]
        public void PerCallDeadlines()
        {
            using (var c = Connect(_topo.Url))
            {
                // A write held by CLIENT PAUSE WRITE misses a short deadline. Pauses stay short of the
                // sentinels' down-after (1000 ms): their PUBLISH waits behind them too.
                c.Execute("CLIENT", "PAUSE", "500", "WRITE");
                var e = Wait.Fails(c.ExecuteAsync(TimeSpan.FromMilliseconds(100), "SET", "net:paused", "1"), 20000, "execute");
                Assert.That(e, Is.InstanceOf<SentinelTimeoutException>());
                e = Wait.Fails(c.PipelineAsync(new[] { new object[] { "CLIENT", "PAUSE", "500", "WRITE" }, new object[] { "SET", "net:paused", "2" } },
                    TimeSpan.FromMilliseconds(100)), 20000, "pipeline");
                Assert.That(e, Is.InstanceOf<SentinelTimeoutException>());
                Wait.Within(c.ExecuteAsync(TimeSpan.FromSeconds(20), "CLIENT", "UNPAUSE"), 30000, "unpause").GetAwaiter().GetResult();
                Assert.Throws<ConfigException>(() => c.ExecuteAsync(TimeSpan.Zero, "PING"));
            }
        }

        [Test]
        public void CancellingTheTokenCancelsTheCommandInTheLibraryAndItIsNotRetried()
        {
            using (var c = Connect(_topo.Url))
            using (var cts = new CancellationTokenSource())
            {
                c.Execute("DEL", "net:cancel");
                var t = c.ExecuteAsync(cts.Token, "BLPOP", "net:cancel", "0");
                Wait.Until(() => Blocked(c) == 1, 20000, "the BLPOP to reach the server");
                cts.Cancel();
                Assert.That(Wait.Settles(t, 20000, "cancelled"), Is.InstanceOf<TaskCanceledException>());
                // Cancelled in the library: its connection closes, nothing pops the pushed value.
                Wait.Until(() => Blocked(c) == 0, 20000, "the BLPOP's connection to close");
                Assert.That(c.Execute("LPUSH", "net:cancel", "x").AsInt64(), Is.EqualTo(1));
                Assert.That(c.Execute("LLEN", "net:cancel").AsInt64(), Is.EqualTo(1));
            }
        }

        [Test]
        public void HintsNameTheDotNetApi()
        {
            using (var c = Connect(_topo.Url))
            {
                var e = Assert.Throws<ConfigException>(() => c.Execute("MULTI"));
                StringAssert.Contains("TransactionAsync(commands)", e.Message);
                StringAssert.DoesNotContain("Client::", e.Message);
                StringAssert.DoesNotContain("sr_", e.Message);
                var w = Assert.Throws<ConfigException>(() => c.Execute("WATCH", "k"));
                StringAssert.Contains("TransactionAsync(commands, watch)", w.Message);
                StringAssert.DoesNotContain("sr_", w.Message);
            }
        }

        [Test]
        public void TransactionsWithWatch()
        {
            using (var c = Connect(_topo.Url))
            {
                c.Execute("DEL", "net:tx");
                var r = Wait.Within(c.TransactionAsync(new[] { new object[] { "INCR", "net:tx" }, new object[] { "INCR", "net:tx" } },
                    new object[] { "net:tx" }), 20000, "transaction").GetAwaiter().GetResult();
                Assert.That(r.Select(x => x.AsInt64()), Is.EqualTo(new long[] { 1, 2 }));
                using (var tx = Wait.Within(c.BeginTransactionAsync(), 20000, "begin").GetAwaiter().GetResult())
                {
                    Wait.Settles(tx.WatchAsync("net:tx"), 20000, "watch");
                    Assert.That(Wait.Within(tx.ExecuteAsync("GET", "net:tx"), 20000, "get").GetAwaiter().GetResult().AsString(), Is.EqualTo("2"));
                    var replies = Wait.Within(tx.ExecAsync(new[] { new object[] { "INCRBY", "net:tx", 10 } }), 20000, "exec").GetAwaiter().GetResult();
                    Assert.That(replies.Single().AsInt64(), Is.EqualTo(12));
                    Assert.That(Wait.Fails(tx.ExecAsync(new[] { new object[] { "INCR", "net:tx" } }), 20000, "ended"), Is.InstanceOf<ConfigException>());
                }
                using (var tx = Wait.Within(c.BeginTransactionAsync(), 20000, "begin").GetAwaiter().GetResult())
                {
                    Assert.That(Wait.Settles(tx.WatchAsync("net:tx"), 20000, "watch"), Is.Null);
                    c.Execute("SET", "net:tx", "100");
                    Assert.That(Wait.Within(tx.ExecAsync(new[] { new object[] { "INCR", "net:tx" } }), 20000, "exec").GetAwaiter().GetResult(), Is.Null,
                        "a watched key changed: nothing ran");
                }
                Assert.That(c.Execute("GET", "net:tx").AsString(), Is.EqualTo("100"));
            }
        }

        [Test]
        public void CancellingTransactionAsyncCancelsItsExec()
        {
            // Sentinels that wait 60 s before they call a sleeping primary down: no failover.
            using (var topo = new TopologyProcess("--replicas", "0", "--down-after", "60000"))
            using (var c = Connect(topo.Url))
            using (var cts = new CancellationTokenSource())
            {
                Assert.That(c.Execute("PING").AsString(), Is.EqualTo("PONG"));
                // The server runs the EXEC for 3 s: only the token can end the call before that.
                var t = c.TransactionAsync(new[] { new object[] { "DEBUG", "SLEEP", "3" } }, null, null, cts.Token);
                cts.CancelAfter(200);
                Assert.That(Wait.Settles(t, 2500, "the cancelled transaction"), Is.InstanceOf<TaskCanceledException>());
            }
        }

        [Test]
        public void ExecIsRefusedAfterAFailover()
        {
            using (var topo = new TopologyProcess())
            using (var c = Connect(topo.Url))
            {
                c.Execute("SET", "net:f", "1");
                int old = c.GetTopology().Primary.Port;
                using (var tx = Wait.Within(c.BeginTransactionAsync(), 20000, "begin").GetAwaiter().GetResult())
                {
                    Wait.Settles(tx.WatchAsync("net:f"), 20000, "watch");
                    topo.Command("failover");
                    var np = (int)(double)topo.Command("wait-primary-not " + old + " 40000")["port"];
                    Wait.Until(() => c.GetTopology().Primary.Port == np, 40000, "the client to follow");
                    var e = Wait.Fails(tx.ExecAsync(new[] { new object[] { "INCR", "net:f" } }), 20000, "exec");
                    Assert.That(e, Is.InstanceOf<ConnectionLostException>());
                    StringAssert.Contains("nothing was applied", e.Message);
                }
                Assert.That(c.Execute("GET", "net:f").AsString(), Is.EqualTo("1"));
            }
        }

        [Test]
        public void CoreLogRecordsReachTheLogHookWithoutSecrets()
        {
            var lines = new ConcurrentQueue<KeyValuePair<TraceLevel, string>>();
            var before = SentinelClient.Log;
            SentinelClient.Log = (level, message) => lines.Enqueue(new KeyValuePair<TraceLevel, string>(level, message));
            SentinelClient.CoreLogLevel = TraceLevel.Verbose;
            try
            {
                var options = new Dictionary<string, string> { { "connect_timeout_ms", "200" } };
                using (SentinelClient.Open("redis+sentinel://app:pw-Secret-42@127.0.0.1:1/svc?sentinel_password=sent-Secret-43", options))
                {
                    Wait.Until(() => lines.Any(l => l.Key == TraceLevel.Warning), 30000, "a warning about the unreachable sentinel");
                }
            }
            finally
            {
                SentinelClient.CoreLogLevel = TraceLevel.Off;
                SentinelClient.Log = before;
            }
            Assert.That(lines.All(l => l.Value.StartsWith("[sentinel_recovery")), Is.True, "targets under sentinel_recovery");
            Assert.That(lines.Any(l => l.Value.Contains("Secret-4")), Is.False, "no secret in any line");
        }
    }
}
