// address_map's function form and SentinelDoctor.RunAsync, against a real topology.
using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using NUnit.Framework;

namespace SentinelRecovery.Tests
{
    [TestFixture]
    public class DoctorTests
    {
        private TopologyProcess _topo;

        [TestFixtureSetUp]
        public void Up() { _topo = new TopologyProcess(); }

        [TestFixtureTearDown]
        public void Down() { if (_topo != null) _topo.Dispose(); }

        [Test]
        public async Task AnAddressMapFunctionMapsWhatSentinelsReportAndAThrowFallsBack()
        {
            int port = _topo.PrimaryPort;
            int calls = 0;
            Func<NodeAddress, NodeAddress> map = a =>
            {
                Interlocked.Increment(ref calls);
                if (a.Port == port) return new NodeAddress("localhost", port);
                throw new InvalidOperationException("a bug in the map"); // replicas: used as reported
            };
            using (var c = await Wait.Within(SentinelClient.ConnectAsync(_topo.Url, null, map), 15000, "ConnectAsync"))
            {
                var t = c.GetTopology();
                Assert.That(t.Primary.Host, Is.EqualTo("localhost"));
                Assert.That(t.Primary.Port, Is.EqualTo(port));
                Assert.That(t.Primary.Announced, Is.EqualTo(new NodeAddress("127.0.0.1", port)));
                Assert.That((await Wait.Within(c.ExecuteAsync("SET", "dotnet:mapped", "1"), 10000, "SET")).AsString(),
                    Is.EqualTo("OK"));
                Wait.Until(() => c.GetTopology().Replicas.Count == _topo.ReplicaPorts.Count, 10000, "replicas listed");
                foreach (var r in c.GetTopology().Replicas)
                {
                    Assert.That(r.Host, Is.EqualTo("127.0.0.1"));
                    Assert.That(r.Announced, Is.Null);
                }
            }
            Assert.That(calls, Is.GreaterThan(0));
        }

        /// <summary>Replicas announce 127.0.0.99 (nothing answered there before the data nodes bound
        /// it too; the testkit checks); the map sends the client to 127.0.0.1, and the promotion
        /// after a kill -9 is followed under the mapped address, the announced one kept beside it.</summary>
        [Test]
        public async Task AMappedTopologyIsFollowedThroughAKill9Failover()
        {
            const string announced = "127.0.0.99";
            using (var topo = new TopologyProcess())
            {
                topo.Command("announce-replicas " + announced);
                Func<NodeAddress, NodeAddress> map = a => a.Host == announced ? new NodeAddress("127.0.0.1", a.Port) : null;
                var options = new Dictionary<string, string> { { "command_timeout_ms", "5000" } };
                using (var c = await Wait.Within(SentinelClient.ConnectAsync(topo.Url, options, map), 15000, "ConnectAsync"))
                {
                    Wait.Until(() =>
                    {
                        var replicas = c.GetTopology().Replicas;
                        return replicas.Count == topo.ReplicaPorts.Count
                            && replicas.All(r => r.Host == "127.0.0.1" && r.Announced != null && r.Announced.Host == announced);
                    }, 30000, "the replicas under their mapped addresses");
                    int old = topo.PrimaryPort;
                    topo.Command("kill9 " + old);
                    var promoted = topo.Command("wait-primary-not " + old + " 40000");
                    Assert.That(promoted["host"], Is.EqualTo(announced), "what the sentinels report");
                    int port = (int)(double)promoted["port"];
                    Wait.Until(() =>
                    {
                        var p = c.GetTopology().Primary;
                        return p != null && p.Port == port && p.Host == "127.0.0.1";
                    }, 40000, "the mapped new primary");
                    Assert.That(c.GetTopology().Primary.Announced, Is.EqualTo(new NodeAddress(announced, port)));
                    Assert.That((await Wait.Within(c.ExecuteAsync("SET", "dotnet:mapped:after", "1"), 10000, "SET")).AsString(),
                        Is.EqualTo("OK"));
                }
            }
        }

        [Test]
        public async Task TheDoctorReportsAHealthyTopologyAndAnUnreachableSentinel()
        {
            var report = await Wait.Within(
                SentinelDoctor.RunAsync(_topo.Url, null, new DoctorOptions { Pings = 3 }), 60000, "RunAsync");
            Assert.That(report.Status, Is.EqualTo(DoctorStatus.Healthy), report.Json);
            Assert.That(report.ExitCode, Is.EqualTo(0));
            var json = (Dictionary<string, object>)Json.Parse(report.Json);
            Assert.That(json["service"], Is.EqualTo(_topo.Service));
            var verdict = (Dictionary<string, object>)json["verdict"];
            Assert.That(verdict["status"], Is.EqualTo("healthy"));

            var listener = new System.Net.Sockets.TcpListener(System.Net.IPAddress.Loopback, 0);
            listener.Start();
            int closed = ((System.Net.IPEndPoint)listener.LocalEndpoint).Port;
            listener.Stop();
            var failed = await Wait.Within(SentinelDoctor.RunAsync("redis+sentinel://127.0.0.1:" + closed + "/mymaster",
                new Dictionary<string, string> { { "connect_timeout_ms", "500" } }), 60000, "RunAsync");
            Assert.That(failed.Status, Is.EqualTo(DoctorStatus.Failure));
            StringAssert.Contains("\"sentinel_unreachable\"", failed.Json);

            Assert.Throws<ConfigException>(() => SentinelDoctor.RunAsync(_topo.Url,
                new Dictionary<string, string> { { "address_map", "10.0.0.5:6379" } }));
        }
    }
}
