// The shared per-call timeout cases (tests/cases/timeouts.tsv; the rule lives in the core's
// deadline module, reached through sr_call_timeout_ms): each value as the TimeSpan of
// ExecuteAsync(timeout, ...) and PipelineAsync(..., timeout). answers: the GET answers; accepted:
// it answers or times out (a deadline too short for a busy machine); refused: ConfigException
// whose message starts "timeout must be", thrown before anything is sent. A
// TimeSpan holds no NaN or infinity: those cases are skipped, saying so.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.IO;
using System.Linq;
using NUnit.Framework;

namespace SentinelRecovery.Tests
{
    [TestFixture]
    public class TimeoutCasesTests
    {
        public sealed class Case
        {
            public string Value;
            public double Ms;
            public string Expect;
            public string Why;
            public override string ToString() { return Value; }
        }

        public static IEnumerable<Case> Cases()
        {
            var cases = new List<Case>();
            foreach (var f in SharedCases.Rows("SR_TIMEOUT_CASES_FILE", 3, 8))
            {
                if (f[1] != "answers" && f[1] != "accepted" && f[1] != "refused") throw new FormatException(f[0] + ": expect " + f[1]);
                double ms = f[0] == "NaN" ? double.NaN : f[0] == "inf" ? double.PositiveInfinity
                    : double.Parse(f[0], CultureInfo.InvariantCulture);
                cases.Add(new Case { Value = f[0], Ms = ms, Expect = f[1], Why = f[2] });
            }
            return cases;
        }

        private TopologyProcess _topo;
        private SentinelClient _client;

        [TestFixtureSetUp]
        public void Up()
        {
            _topo = new TopologyProcess();
            _client = Wait.Within(SentinelClient.ConnectAsync(_topo.Url), 30000, "connect").GetAwaiter().GetResult();
        }

        [TestFixtureTearDown]
        public void Down()
        {
            if (_client != null) _client.Dispose();
            _topo.Dispose();
        }

        [Test, TestCaseSource("Cases")]
        public void FollowsTheSharedRule(Case c)
        {
            if (double.IsNaN(c.Ms) || double.IsInfinity(c.Ms))
            {
                Assert.Ignore(c.Value + ": a TimeSpan cannot hold it (" + c.Why + ")");
                return;
            }
            var timeout = TimeSpan.FromTicks((long)(c.Ms * TimeSpan.TicksPerMillisecond));
            var what = c.Value + " ms (" + c.Why + ")";
            if (c.Expect != "refused")
            {
                try
                {
                    var reply = Wait.Within(_client.ExecuteAsync(timeout, "GET", "timeout-case:absent"), 30000, what).GetAwaiter().GetResult();
                    Assert.IsTrue(reply.IsNull, what);
                    var results = Wait.Within(_client.PipelineAsync(new[] { new object[] { "GET", "timeout-case:absent" } }, timeout), 30000, what)
                        .GetAwaiter().GetResult();
                    Assert.AreEqual(1, results.Length, what);
                }
                catch (SentinelTimeoutException) when (c.Expect == "accepted")
                {
                    // A deadline shorter than a busy machine keeps: accepted all the same.
                }
                return;
            }
            var e = Assert.Throws<ConfigException>(() => _client.ExecuteAsync(timeout, "GET", "timeout-case:absent"), what);
            StringAssert.StartsWith("timeout must be", e.Message, what);
            e = Assert.Throws<ConfigException>(() => _client.PipelineAsync(new[] { new object[] { "GET", "timeout-case:absent" } }, timeout), what);
            StringAssert.StartsWith("timeout must be", e.Message, what);
        }
    }
}
