// The shared deadline cases (tests/cases/deadlines.tsv, which every binding's suite reads):
// ExecuteAsync(TimeSpan, ...) for a per-call timeout, ExecuteAsync(...) under the client's
// command_timeout_ms. Each call ends by its deadline with the expected outcome, and afterwards no
// client is left blocked on the server (INFO clients: blocked_clients back to what it was), i.e.
// a timed-out blocking command's connection was closed.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Globalization;
using System.IO;
using System.Linq;
using NUnit.Framework;

namespace SentinelRecovery.Tests
{
    [TestFixture]
    public class DeadlineCasesTests
    {
        /// <summary>What a call may take beyond its deadline (a busy 2-core machine).</summary>
        private const int SlackMs = 1000;
        /// <summary>The client default of a per-call case: long, so only the call's own timeout can end it.</summary>
        private const int LongDefaultMs = 30000;

        public sealed class Case
        {
            public string Name;
            public bool PerCall;
            public int TimeoutMs;
            public int BlockMs;
            public bool ExpectTimeout;
            public string[] Command;
            public int BudgetMs { get { return TimeoutMs + (PerCall ? 0 : BlockMs) + SlackMs; } }
            public override string ToString() { return Name; }
        }

        public static IEnumerable<Case> Cases()
        {
            var path = Environment.GetEnvironmentVariable("SR_CASES_FILE");
            if (string.IsNullOrEmpty(path)) throw new InvalidOperationException("SR_CASES_FILE is not set (scripts/test.sh sets it)");
            var cases = new List<Case>();
            foreach (var line in File.ReadAllLines(path))
            {
                if (line.Trim().Length == 0 || line.StartsWith("#", StringComparison.Ordinal)) continue;
                var f = line.Split('\t');
                if (f.Length != 6) throw new FormatException(path + ": six tab-separated fields in " + line);
                if (f[1] != "per-call" && f[1] != "default") throw new FormatException(f[0] + ": deadline " + f[1]);
                if (f[4] != "timeout" && f[4] != "nil") throw new FormatException(f[0] + ": expect " + f[4]);
                cases.Add(new Case
                {
                    Name = f[0],
                    PerCall = f[1] == "per-call",
                    TimeoutMs = int.Parse(f[2], CultureInfo.InvariantCulture),
                    BlockMs = int.Parse(f[3], CultureInfo.InvariantCulture),
                    ExpectTimeout = f[4] == "timeout",
                    Command = f[5].Split(' '),
                });
            }
            if (cases.Count == 0) throw new FormatException(path + ": no cases");
            return cases;
        }

        private TopologyProcess _topo;
        private SentinelClient _observer;
        private int _serial;

        [TestFixtureSetUp]
        public void Up()
        {
            _topo = new TopologyProcess();
            _observer = Connect(_topo.Url, 5000);
        }

        [TestFixtureTearDown]
        public void Down()
        {
            if (_observer != null) _observer.Dispose();
            _topo.Dispose();
        }

        private static SentinelClient Connect(string url, int defaultMs)
        {
            var options = new Dictionary<string, string> { { "command_timeout_ms", defaultMs.ToString(CultureInfo.InvariantCulture) } };
            return Wait.Within(SentinelClient.ConnectAsync(url, options), 30000, "connect").GetAwaiter().GetResult();
        }

        private long BlockedClients()
        {
            var info = _observer.Execute("INFO", "clients").AsString();
            var line = info.Split('\n').FirstOrDefault(l => l.StartsWith("blocked_clients:", StringComparison.Ordinal));
            Assert.IsNotNull(line, "no blocked_clients in INFO clients: " + info);
            return long.Parse(line.Substring("blocked_clients:".Length).Trim(), CultureInfo.InvariantCulture);
        }

        [Test, TestCaseSource("Cases")]
        public void EndsByItsDeadlineAndLeavesNothingBlocked(Case c)
        {
            using (var client = Connect(_topo.Url, c.PerCall ? LongDefaultMs : c.TimeoutMs))
            {
                var before = BlockedClients();
                var key = "deadline-case:" + c.Name + ":" + (_serial++).ToString(CultureInfo.InvariantCulture);
                var args = c.Command.Select(a => (object)a.Replace("{key}", key)).ToArray();
                var clock = Stopwatch.StartNew();
                var task = c.PerCall ? client.ExecuteAsync(TimeSpan.FromMilliseconds(c.TimeoutMs), args) : client.ExecuteAsync(args);
                Exception error = null;
                RedisReply reply = null;
                try { reply = Wait.Within(task, c.BudgetMs + 5000, c.Name).GetAwaiter().GetResult(); }
                catch (Exception e) { error = e; }
                var took = clock.ElapsedMilliseconds;
                Assert.LessOrEqual(took, c.BudgetMs, c.Name + ": ended after " + took + " ms");
                if (c.ExpectTimeout)
                    Assert.IsInstanceOf<SentinelTimeoutException>(error, c.Name + ": expected a timeout, got " + (error == null ? "a reply" : error.ToString()));
                else
                {
                    Assert.IsNull(error, c.Name + ": " + error);
                    Assert.IsTrue(reply.IsNull, c.Name + ": expected a nil reply");
                }
                Wait.Until(() => BlockedClients() <= before, 5000, c.Name + ": the server still blocks a client");
            }
        }
    }
}
