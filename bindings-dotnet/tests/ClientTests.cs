// NUnit 2.6 (Debian) on Mono, against real Redis + Sentinel topologies from `sr-topology`.
using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Diagnostics;
using System.Globalization;
using System.IO;
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
                    Assert.That(threads.Take(), Is.EqualTo("sr-dotnet-host"));
                }
            }
        }

        [Test]
        public async Task MessagesTransactionStepsAndTheDoctorCompleteOnTheHostThreadCommandsDoNot()
        {
            // While an event handler holds the sr-dotnet-host thread, nothing that completes
            // through the host mailbox can complete: not a message, not EXEC, not a diagnosis,
            // even once the server has answered; released, each arrives, once. A command and a
            // pipeline complete on the core thread meanwhile (they never wait for that thread).
            var key = "dotnet:host:" + Guid.NewGuid().ToString("N");
            using (var c = await SentinelClient.ConnectAsync(_topo.Url))
            {
                var sub = await c.SubscribeAsync(key);
                var received = new BlockingCollection<string>();
                var messageThreads = new BlockingCollection<string>();
                sub.Message += (s, m) => { received.Add(m.PayloadText); messageThreads.Add(Thread.CurrentThread.Name); };
                var tx = await c.BeginTransactionAsync();
                await tx.WatchAsync(key);
                Assert.That((await tx.ExecuteAsync("GET", key)).IsNull, Is.True);
                var held = new ManualResetEventSlim();
                var release = new ManualResetEventSlim();
                string holder = null;
                c.PrimaryChanged += (s, e) =>
                {
                    if (held.IsSet) return;
                    holder = Thread.CurrentThread.Name;
                    held.Set();
                    release.Wait(60000);
                };
                Task<RedisReply[]> exec;
                Task<DoctorReport> doctor;
                try
                {
                    Assert.That(held.Wait(10000), Is.True, "no primary_changed event");
                    Assert.That(holder, Is.EqualTo("sr-dotnet-host"));
                    exec = tx.ExecAsync(new[] { new object[] { "SET", key, "1" } });
                    doctor = SentinelDoctor.RunAsync(_topo.Url, null, new DoctorOptions { Pings = 1 });
                    c.Execute("PUBLISH", key, "m1"); // the blocking form: no mailbox involved
                    // EXEC ran on the server; its reply and the message have reached the client
                    Wait.Until(() => c.Execute("GET", key).AsString() == "1", 10000, "EXEC applied");
                    var ping = c.ExecuteAsync("PING");
                    var pipeline = c.PipelineAsync(new[] { new object[] { "PING" } });
                    Assert.That(ping.Wait(10000), Is.True, "a command waited for the host thread");
                    Assert.That(pipeline.Wait(10000), Is.True, "a pipeline waited for the host thread");
                    Thread.Sleep(1000);
                    Assert.That(exec.IsCompleted, Is.False, "EXEC completed without the host thread");
                    Assert.That(doctor.IsCompleted, Is.False, "the doctor completed without the host thread");
                    Assert.That(received.Count, Is.EqualTo(0), "a message arrived without the host thread");
                }
                finally
                {
                    release.Set();
                }
                var replies = await Wait.Within(exec, 10000, "EXEC");
                Assert.That(replies.Length, Is.EqualTo(1));
                Assert.That(replies[0].AsString(), Is.EqualTo("OK"));
                string got;
                Assert.That(received.TryTake(out got, 10000), Is.True, "the message");
                Assert.That(got, Is.EqualTo("m1"));
                Assert.That(messageThreads.Take(), Is.EqualTo("sr-dotnet-messages"));
                var report = await Wait.Within(doctor, 60000, "the doctor");
                StringAssert.StartsWith("{", report.Json);
                tx.Dispose();
                sub.Dispose();
            }
        }

        [Test]
        public async Task EveryCommandThroughTheMailboxCompletesOnceWithItsOwnReply()
        {
            var key = "dotnet:mailbox:" + Guid.NewGuid().ToString("N");
            using (var c = await SentinelClient.ConnectAsync(_topo.Url))
            {
                var tasks = Enumerable.Range(0, 2000).Select(_ => c.ExecuteAsync("INCR", key)).ToList();
                var pipeline = c.PipelineAsync(new[] { new object[] { "GET", key }, new object[] { "PING" } });
                var values = (await Task.WhenAll(tasks)).Select(r => r.AsInt64()).OrderBy(v => v).ToList();
                Assert.That(values, Is.EqualTo(Enumerable.Range(1, 2000).Select(i => (long)i).ToList()));
                var results = await pipeline;
                Assert.That(results.Length, Is.EqualTo(2));
                Assert.That(results[1].Reply.AsString(), Is.EqualTo("PONG"));
            }
        }

        [Test]
        public async Task EventsStartWithTheCurrentPrimary()
        {
            using (var c = await SentinelClient.ConnectAsync(_topo.Url))
            {
                // attached after the first discovery: the first event still says which primary is current
                var changed = new BlockingCollection<PrimaryChangedEventArgs>();
                var threads = new BlockingCollection<string>();
                c.PrimaryChanged += (s, e) => { changed.Add(e); threads.Add(Thread.CurrentThread.Name); };
                PrimaryChangedEventArgs ev;
                Assert.That(changed.TryTake(out ev, 10000), Is.True, "no primary_changed event");
                Assert.That(ev.OldPrimary, Is.Null);
                Assert.That(ev.NewPrimary.Port, Is.EqualTo(_topo.PrimaryPort));
                Assert.That(threads.Take(), Is.EqualTo("sr-dotnet-host"));
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
                bad.TopologyEvent += (s, e) => { if (Volatile.Read(ref calls) > 0) after.Add(e); };
                // Other kinds (sentinel_service_unknown, ...) may come first: wait for the throw,
                // then for events after it.
                Wait.Until(() => Volatile.Read(ref calls) >= 1, 15000, "a discovery_failed event");
                TopologyEventArgs e1, e2;
                Assert.That(after.TryTake(out e1, 15000) && after.TryTake(out e2, 15000), Is.True, "events stopped after a handler threw");
            }
        }

        /// <summary>Collects what reaches <see cref="Trace"/>'s listeners.</summary>
        private sealed class CollectingListener : TraceListener
        {
            public readonly BlockingCollection<string> Messages = new BlockingCollection<string>();
            public override void TraceEvent(TraceEventCache cache, string source, TraceEventType type, int id, string message)
            {
                Messages.Add(type + ": " + message);
            }
            public override void TraceEvent(TraceEventCache cache, string source, TraceEventType type, int id, string format, params object[] args)
            {
                Messages.Add(type + ": " + (args == null ? format : string.Format(format, args)));
            }
            public override void Write(string message) { }
            public override void WriteLine(string message) { Messages.Add(message); }
        }

        [Test]
        public void TopologyEventHandlerExceptionsReachTraceListenersAndLaterEventsStillArrive()
        {
            var listener = new CollectingListener();
            Trace.Listeners.Add(listener);
            try
            {
                using (var bad = SentinelClient.Open(_topo.Url.Replace("/" + _topo.Service, "/nosuch-trace")))
                {
                    int calls = 0;
                    var later = new BlockingCollection<TopologyEventArgs>();
                    var others = new BlockingCollection<TopologyEventArgs>();
                    // Throws on the first event only; must still see the next one.
                    bad.TopologyEvent += (s, e) =>
                    {
                        if (Interlocked.Increment(ref calls) == 1) throw new InvalidOperationException("handler bug 1");
                        later.Add(e);
                    };
                    bad.TopologyEvent += (s, e) => others.Add(e);
                    string message = null;
                    Assert.That(SpinTake(listener.Messages, m => m.Contains("handler bug 1"), 15000, out message), Is.True,
                        "the handler's exception never reached a TraceListener");
                    TopologyEventArgs e1, e2;
                    Assert.That(others.TryTake(out e1, 15000), Is.True, "the next handler of the same event did not run");
                    StringAssert.StartsWith("Error: ", message);
                    StringAssert.Contains("a " + e1.KindName + " event handler threw System.InvalidOperationException", message);
                    Assert.That(later.TryTake(out e2, 15000), Is.True, "no event reached the handler after it threw");
                }
            }
            finally
            {
                Trace.Listeners.Remove(listener);
            }
        }

        [Test]
        public void HandlerExceptionsGoToEventHandlerErrorAndTheLogHook()
        {
            var logged = new BlockingCollection<string>();
            SentinelClient.Log = (level, m) => logged.Add(level + ": " + m);
            try
            {
                using (var bad = SentinelClient.Open(_topo.Url.Replace("/" + _topo.Service, "/nosuch-hook")))
                {
                    var bug = new InvalidOperationException("handler bug 2");
                    var errors = new BlockingCollection<EventHandlerErrorEventArgs>();
                    bad.EventHandlerError += (s, e) => { Assert.That(s, Is.SameAs(bad)); errors.Add(e); };
                    bad.EventHandlerError += (s, e) => { throw new ApplicationException("error handler bug"); };
                    bad.DiscoveryFailed += (s, e) => { throw bug; };
                    EventHandlerErrorEventArgs err;
                    Assert.That(errors.TryTake(out err, 15000), Is.True, "EventHandlerError was not raised");
                    Assert.That(err.Exception, Is.SameAs(bug));
                    Assert.That(err.Event, Is.InstanceOf<DiscoveryFailedEventArgs>());
                    Assert.That(err.Event.Service, Is.EqualTo("nosuch-hook"));
                    // The stream goes on: the next event fails the same way and is reported again.
                    Assert.That(errors.TryTake(out err, 15000), Is.True, "events stopped after a handler threw");
                    string m;
                    Assert.That(SpinTake(logged, x => x.Contains("handler bug 2"), 5000, out m), Is.True, "not logged: handler bug 2");
                    StringAssert.StartsWith("Error: ", m);
                    Assert.That(SpinTake(logged, x => x.Contains("error handler bug"), 5000, out m), Is.True,
                        "not logged: the EventHandlerError handler's own exception");
                }
            }
            finally
            {
                SentinelClient.Log = null;
            }
        }

        /// <summary>Takes items until one matches (true) or the deadline passes (false).</summary>
        private static bool SpinTake(BlockingCollection<string> items, Func<string, bool> match, int timeoutMs, out string found)
        {
            var sw = Stopwatch.StartNew();
            found = null;
            while (sw.ElapsedMilliseconds < timeoutMs)
            {
                string item;
                if (items.TryTake(out item, (int)Math.Max(1, timeoutMs - sw.ElapsedMilliseconds)) && match(item))
                {
                    found = item;
                    return true;
                }
            }
            return false;
        }

        /// <summary>A case's number as the .NET type of its kind.</summary>
        private static object Number(string kind, string value)
        {
            // Mono's double.Parse drops the sign of "-0".
            double d = value == "inf" ? double.PositiveInfinity : value == "-inf" ? double.NegativeInfinity
                : value == "NaN" ? double.NaN : value == "-0" ? -0.0 : 0;
            bool special = value == "inf" || value == "-inf" || value == "NaN" || value == "-0";
            switch (kind)
            {
                case "int": return long.Parse(value, CultureInfo.InvariantCulture);
                case "float": return special ? d : double.Parse(value, CultureInfo.InvariantCulture);
                case "float32": return special ? (float)d : float.Parse(value, CultureInfo.InvariantCulture);
                default: throw new FormatException("kind " + kind);
            }
        }

        [Test]
        public async Task ArgumentsFollowTheSharedNumberAndUnicodePolicy()
        {
            using (var c = await Wait.Within(SentinelClient.ConnectAsync(_topo.Url), 15000, "ConnectAsync"))
            {
                // The shared cases (tests/cases/arguments.tsv): every binding sends these numbers alike.
                var cases = new List<Tuple<object, string>>();
                foreach (var f in SharedCases.Rows("SR_ARGUMENT_CASES_FILE", 3, 19))
                {
                    var line = string.Join(" ", f);
                    if (f[2] == "refused")
                    {
                        var refused = Assert.Throws<ConfigException>(() => c.ExecuteAsync("ECHO", Number(f[0], f[1])), line);
                        Assert.That(refused.Message, Is.EqualTo("argument 1 is NaN"), line);
                        continue;
                    }
                    cases.Add(Tuple.Create(Number(f[0], f[1]), f[2]));
                }
                // What only .NET can give: unsigned and narrower integers, a UTF-16 surrogate pair.
                cases.Add(Tuple.Create((object)(1.0 / 3), "0.3333333333333333"));
                cases.Add(Tuple.Create((object)float.NegativeInfinity, "-inf"));
                cases.Add(Tuple.Create((object)(-7), "-7"));
                cases.Add(Tuple.Create((object)long.MaxValue, "9223372036854775807"));
                cases.Add(Tuple.Create((object)ulong.MaxValue, "18446744073709551615"));
                cases.Add(Tuple.Create((object)"\ud83d\ude00 pair", "\ud83d\ude00 pair"));
                foreach (var t in cases)
                {
                    var echoed = (await c.ExecuteAsync("ECHO", t.Item1)).AsString();
                    Assert.That(echoed, Is.EqualTo(t.Item2), t.Item1.GetType().Name + " " + t.Item2);
                }
                // Infinity as Redis itself writes it: a score that reads back the same.
                var key = "dotnet:args:" + Guid.NewGuid().ToString("N");
                await c.ExecuteAsync("ZADD", key, double.PositiveInfinity, "m");
                Assert.That((await c.ExecuteAsync("ZSCORE", key, "m")).AsDouble(), Is.EqualTo(double.PositiveInfinity));

                var nan = Assert.Throws<ConfigException>(() => c.ExecuteAsync("SET", key, double.NaN));
                Assert.That(nan.Message, Is.EqualTo("argument 2 is NaN"));
                Assert.That(nan.Code, Is.EqualTo(ErrorCode.Config));
                Assert.Throws<ConfigException>(() => c.ExecuteAsync("SET", key, float.NaN));
                Assert.Throws<ConfigException>(() => c.Execute("SET", key, double.NaN));
                var lone = Assert.Throws<ConfigException>(() => c.ExecuteAsync("SET", "k\ud800", "v"));
                Assert.That(lone.Message, Is.EqualTo("argument 1 is not valid Unicode: lone surrogate"));
                lone = Assert.Throws<ConfigException>(() => c.ExecuteAsync("SET", key, "\udc00x"));
                Assert.That(lone.Message, Is.EqualTo("argument 2 is not valid Unicode: lone surrogate"));
                // Nothing of the refused commands was sent.
                Assert.That((await c.ExecuteAsync("EXISTS", key + ":none", "k\ufffd")).AsInt64(), Is.EqualTo(0));
                Assert.That((await c.ExecuteAsync("TYPE", key)).AsString(), Is.EqualTo("zset"));
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
