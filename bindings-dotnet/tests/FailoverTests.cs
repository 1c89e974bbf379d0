// Failover and recovery against real topologies: each fixture owns its topology because it
// breaks it.
using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using NUnit.Framework;

namespace SentinelRecovery.Tests
{
    [TestFixture]
    public class FailoverTests
    {
        private TopologyProcess _topo;

        [TestFixtureSetUp]
        public void Up() { _topo = new TopologyProcess(); }

        [TestFixtureTearDown]
        public void Down() { if (_topo != null) _topo.Dispose(); }

        /// <summary>SENTINEL FAILOVER while four writers INCR one counter: no writer hangs, the
        /// client follows the new primary, events arrive on the dispatcher thread, and the counter
        /// never exceeds what was issued.</summary>
        [Test]
        public async Task FailoverWithConcurrentWriters()
        {
            var key = "dotnet:failover:" + Guid.NewGuid().ToString("N");
            using (var c = await SentinelClient.ConnectAsync(_topo.Url))
            {
                var changed = new BlockingCollection<PrimaryChangedEventArgs>();
                var all = new ConcurrentQueue<TopologyEventArgs>();
                var threads = new ConcurrentDictionary<string, bool>();
                c.PrimaryChanged += (s, e) => { changed.Add(e); threads[Thread.CurrentThread.Name ?? "?"] = true; };
                c.TopologyEvent += (s, e) => { all.Enqueue(e); threads[Thread.CurrentThread.Name ?? "?"] = true; };

                long issued = 0, acked = 0, failed = 0, ackedAfterSwitch = 0;
                int newPort = 0;
                var stop = new CancellationTokenSource();
                Func<Task> writer = async () =>
                {
                    while (!stop.IsCancellationRequested)
                    {
                        Interlocked.Increment(ref issued);
                        try
                        {
                            await c.ExecuteAsync("INCR", key);
                            Interlocked.Increment(ref acked);
                            if (Volatile.Read(ref newPort) != 0) Interlocked.Increment(ref ackedAfterSwitch);
                        }
                        catch (SentinelRecoveryException)
                        {
                            Interlocked.Increment(ref failed);
                            await Task.Delay(10);
                        }
                    }
                };
                var writers = Enumerable.Range(0, 4).Select(_ => Task.Run(writer)).ToArray();
                Wait.Until(() => Interlocked.Read(ref acked) > 50, 10000, "writes before the failover");

                var old = _topo.PrimaryPort;
                var sw = System.Diagnostics.Stopwatch.StartNew();
                long ackedAtFailover = Interlocked.Read(ref acked);
                _topo.Command("failover");
                var np = (int)(double)_topo.Command("wait-primary-not " + old + " 30000")["port"];
                long sentinelsSwitchedMs = sw.ElapsedMilliseconds;
                Wait.Until(() => c.GetTopology().Primary.Port == np, 20000, "the client to follow the new primary");
                Console.WriteLine("failover: sentinels report the new primary after {0} ms, the client follows after {1} ms; {2} writes acked in between",
                    sentinelsSwitchedMs, sw.ElapsedMilliseconds, Interlocked.Read(ref acked) - ackedAtFailover);
                Volatile.Write(ref newPort, np);
                Wait.Until(() => Interlocked.Read(ref ackedAfterSwitch) > 50, 20000, "writes on the new primary");
                stop.Cancel();
                await Wait.Within(Task.WhenAll(writers).ContinueWith(t => true), 20000, "writers (one hung)");

                PrimaryChangedEventArgs ev = null;
                Wait.Until(() => changed.TryTake(out ev) && ev.NewPrimary.Port == np, 10000, "a primary_changed event to the new primary");
                Assert.That(ev.OldPrimary, Is.Not.Null);
                Assert.That(all.Any(e => e.Kind == EventKind.PrimaryChanged), Is.True, "TopologyEvent saw primary_changed");
                Assert.That(threads.Keys, Is.EqualTo(new[] { "sr-dotnet-host" }), "handlers ran off the dispatcher thread");

                long final = (await c.ExecuteAsync("GET", key)).AsInt64();
                Console.WriteLine("issued {0} acked {1} failed {2} final {3}", issued, acked, failed, final);
                Assert.That(final, Is.LessThanOrEqualTo(Interlocked.Read(ref issued)));
                Assert.That(final, Is.GreaterThan(0));
            }
        }
    }

    [TestFixture]
    public class RecoveryTests
    {
        private TopologyProcess _topo;

        [TestFixtureSetUp]
        public void Up() { _topo = new TopologyProcess(); }

        [TestFixtureTearDown]
        public void Down() { if (_topo != null) _topo.Dispose(); }

        /// <summary>kill -9 of the primary; one client is disposed in the middle of the recovery
        /// with commands in flight (Dispose returns, every task completes), another one sees
        /// connection_lost and then writes to the promoted replica.</summary>
        [Test]
        public async Task DisposeDuringRecoveryAndFollowAKilledPrimary()
        {
            var key = "dotnet:kill:" + Guid.NewGuid().ToString("N");
            var survivor = await SentinelClient.ConnectAsync(_topo.Url);
            var victim = await SentinelClient.ConnectAsync(_topo.Url);
            try
            {
                var lost = new BlockingCollection<ConnectionEventArgs>();
                survivor.ConnectionLost += (s, e) => lost.Add(e);
                await survivor.ExecuteAsync("SET", key, "before");
                await victim.ExecuteAsync("PING");

                var old = _topo.PrimaryPort;
                _topo.Command("kill9 " + old);
                // commands issued now wait for (or fail on) the dead primary while recovery runs
                var inflight = Enumerable.Range(0, 20).Select(i => victim.ExecuteAsync("SET", key + ":" + i, "x")).ToArray();
                var survivorWrite = survivor.ExecuteAsync("SET", key, "during");
                await Task.Delay(200); // let the recovery begin (not an assertion)
                var disposed = Task.Run(() => victim.Dispose());
                Wait.Settles(disposed, 10000, "Dispose during recovery");
                foreach (var t in inflight)
                {
                    var e = Wait.Settles(t, 5000, "command in flight at Dispose");
                    if (e != null) Assert.That(e, Is.InstanceOf<SentinelRecoveryException>(), e.ToString());
                }

                ConnectionEventArgs ev;
                Assert.That(lost.TryTake(out ev, 15000), Is.True, "no connection_lost event");
                Assert.That(ev.Primary.Port, Is.EqualTo(old));

                var np = (int)(double)_topo.Command("wait-primary-not " + old + " 30000")["port"];
                Wait.Settles(survivorWrite, 15000, "a write issued while the primary was dead");
                Wait.Until(() => survivor.GetTopology().Primary.Port == np, 20000, "the survivor to follow the promoted replica");
                var r = await Wait.Within(survivor.ExecuteAsync("SET", key, "after"), 10000, "write to the new primary");
                Assert.That(r.AsString(), Is.EqualTo("OK"));
                Assert.That((await survivor.ExecuteAsync("GET", key)).AsString(), Is.EqualTo("after"));
            }
            finally
            {
                survivor.Dispose();
                victim.Dispose();
            }
        }
    }
}
