// Pub/sub against a real topology of its own (it kills the primary): messages before and after a
// kill -9 failover, SubscriptionLost then SubscriptionRestored in between, the loss counted.
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
    public class PubSubTests
    {
        private TopologyProcess _topo;

        [TestFixtureSetUp]
        public void Up() { _topo = new TopologyProcess(); }

        [TestFixtureTearDown]
        public void Down() { if (_topo != null) _topo.Dispose(); }

        [Test]
        public async Task MessagesBeforeAndAfterAKill9Failover()
        {
            var options = new Dictionary<string, string> { { "command_timeout_ms", "10000" } };
            using (var c = await SentinelClient.ConnectAsync(_topo.Url, options))
            {
                var events = new ConcurrentQueue<SubscriptionEventArgs>();
                c.SubscriptionLost += (s, e) => events.Enqueue(e);
                c.SubscriptionRestored += (s, e) => events.Enqueue(e);
                var received = new List<long>();
                var alerts = new ConcurrentQueue<MessageEventArgs>();
                var threads = new ConcurrentDictionary<string, bool>();
                int afterDispose = 0, disposed = 0;
                var sub = await c.SubscribeAsync(new[] { "news" }, new[] { "alerts.*" });
                sub.Message += (s, m) =>
                {
                    if (Volatile.Read(ref disposed) != 0) Interlocked.Increment(ref afterDispose);
                    threads[Thread.CurrentThread.Name ?? "?"] = true;
                    if (m.Pattern == null) lock (received) received.Add(long.Parse(m.PayloadText));
                    else alerts.Enqueue(m);
                };
                Func<int> count = () => { lock (received) return received.Count; };

                long attempted = 0, acknowledged = 0;
                var stop = new CancellationTokenSource();
                var publisher = Task.Run(async () =>
                {
                    while (!stop.IsCancellationRequested)
                    {
                        long n = Interlocked.Increment(ref attempted) - 1;
                        try
                        {
                            await c.ExecuteAsync("PUBLISH", "news", n.ToString());
                            Interlocked.Increment(ref acknowledged);
                        }
                        catch (SentinelRecoveryException) { } // may or may not have been published
                        await Task.Delay(5);
                    }
                });
                Wait.Until(() => count() >= 20, 20000, "messages before the kill");

                var old = _topo.PrimaryPort;
                _topo.Command("kill9 " + old);
                Wait.Until(() => events.Any(e => e.Kind == EventKind.SubscriptionRestored), 90000, "SubscriptionRestored");
                long afterRestore = Interlocked.Read(ref attempted);
                Wait.Until(() => { lock (received) return received.Count(n => n >= afterRestore) >= 20; }, 30000, "messages after the restore");
                stop.Cancel();
                await Wait.Within(publisher.ContinueWith(t => true), 30000, "the publisher to stop");

                var list = events.ToList();
                var lost = list.First(e => e.Kind == EventKind.SubscriptionLost);
                var restored = list.First(e => e.Kind == EventKind.SubscriptionRestored);
                Assert.That(list.IndexOf(lost), Is.LessThan(list.IndexOf(restored)), "lost, then restored");
                Assert.That(lost.Address.Port, Is.EqualTo(old));
                Assert.That(restored.Address.Port, Is.Not.EqualTo(old));
                Assert.That(restored.GapMs, Is.GreaterThan(0));

                await sub.PsubscribeAsync("alerts.*"); // already there: confirmed again
                await c.ExecuteAsync("PUBLISH", "alerts.disk", "full");
                Wait.Until(() => alerts.Count > 0, 10000, "a pattern message");
                MessageEventArgs alert;
                Assert.That(alerts.TryPeek(out alert), Is.True);
                Assert.That(alert.ChannelText, Is.EqualTo("alerts.disk"));
                Assert.That(alert.PatternText, Is.EqualTo("alerts.*"));
                Assert.That(alert.PayloadText, Is.EqualTo("full"));

                long[] got;
                lock (received) got = received.ToArray();
                for (int i = 1; i < got.Length; i++) Assert.That(got[i], Is.GreaterThan(got[i - 1]), "in order, each once");
                long sent = Interlocked.Read(ref attempted);
                Assert.That(got.All(n => n < sent), Is.True);
                Console.WriteLine("pub/sub across kill -9: {0} published ({1} acknowledged), {2} received, {3} lost in a gap of {4} ms, {5} dropped",
                    sent, Interlocked.Read(ref acknowledged), got.Length, sent - got.Length, restored.GapMs, sub.Dropped);
                Assert.That(sub.Dropped, Is.EqualTo(0));
                Assert.That(threads.Keys, Is.EquivalentTo(new[] { "sr-dotnet-messages" }), "handlers run on the message thread");

                sub.Dispose();
                Volatile.Write(ref disposed, 1);
                for (int i = 0; i < 5; i++) await c.ExecuteAsync("PUBLISH", "news", "999999");
                Assert.That(Volatile.Read(ref afterDispose), Is.EqualTo(0), "no handler after Dispose");
                Assert.That(Wait.Fails(sub.SubscribeAsync("more"), 10000, "a change after Dispose"), Is.InstanceOf<ClientClosedException>());

                // The short forms; a subscription without any name is refused.
                using (var byPattern = await c.PsubscribeAsync("short.*"))
                {
                    var shortForms = new BlockingCollection<MessageEventArgs>();
                    byPattern.Message += (s, m) => shortForms.Add(m);
                    await byPattern.SubscribeAsync("plain");
                    await c.ExecuteAsync("PUBLISH", "short.x", "1");
                    await c.ExecuteAsync("PUBLISH", "plain", "2");
                    MessageEventArgs first = null, second = null;
                    Assert.That(shortForms.TryTake(out first, 10000), Is.True, "the pattern message");
                    Assert.That(shortForms.TryTake(out second, 10000), Is.True, "the channel message");
                    Assert.That(first.PatternText, Is.EqualTo("short.*"));
                    Assert.That(second.ChannelText, Is.EqualTo("plain"));
                    Assert.That(second.Pattern, Is.Null);
                }
                Assert.That(Wait.Fails(c.SubscribeAsync(), 10000, "a subscription without names"), Is.InstanceOf<ConfigException>());
            }
        }
    }
}
