// The shared doctor option cases (tests/cases/doctor_options.tsv; the rule lives in the core's
// doctor::Options::from_host): DoctorOptions.Watch and Pings of SentinelDoctor.RunAsync against
// a real topology. Accepted: a report comes; refused: ConfigException naming the option. Through
// C's options struct 0 means "not set" (those cases run as accepted); an int Pings holds no
// fraction and a TimeSpan no NaN (skipped, said so).
using System;
using System.Collections.Generic;
using System.Globalization;
using System.IO;
using NUnit.Framework;

namespace SentinelRecovery.Tests
{
    [TestFixture]
    public class DoctorOptionCasesTests
    {
        public sealed class Case
        {
            public string Watch;
            public string Pings;
            public bool Refused;
            public override string ToString() { return Watch + "/" + Pings; }
        }

        public static IEnumerable<Case> Cases()
        {
            var cases = new List<Case>();
            foreach (var f in SharedCases.Rows("SR_DOCTOR_OPTION_CASES_FILE", 3, 10))
            {
                if (f[2] != "accepted" && f[2] != "refused") throw new FormatException(string.Join(" ", f) + ": expect " + f[2]);
                cases.Add(new Case { Watch = f[0], Pings = f[1], Refused = f[2] == "refused" });
            }
            return cases;
        }

        private TopologyProcess _topo;

        [TestFixtureSetUp]
        public void Up() { _topo = new TopologyProcess(); }

        [TestFixtureTearDown]
        public void Down() { _topo.Dispose(); }

        [Test, TestCaseSource("Cases")]
        public void FollowsTheSharedRule(Case c)
        {
            var how = new DoctorOptions();
            if (c.Watch == "NaN") Assert.Ignore(c + ": a TimeSpan cannot hold NaN");
            if (c.Watch != "-")
                how.Watch = TimeSpan.FromTicks((long)(double.Parse(c.Watch, CultureInfo.InvariantCulture) * TimeSpan.TicksPerMillisecond));
            if (c.Pings != "-")
            {
                double p = double.Parse(c.Pings, CultureInfo.InvariantCulture);
                if (p != Math.Floor(p)) Assert.Ignore(c + ": an int Pings cannot hold a fraction");
                how.Pings = (int)p;
            }
            bool refused = c.Refused;
            if (refused && (c.Watch == "0" || c.Pings == "0"))
            {
                Console.WriteLine(c + ": 0 is \"not set\" through C's options struct, so it runs as accepted");
                refused = false;
            }
            if (!refused)
            {
                var report = Wait.Within(SentinelDoctor.RunAsync(_topo.Url, null, how), 60000, c.ToString()).GetAwaiter().GetResult();
                Assert.IsNotNull(report.Json, c.ToString());
                return;
            }
            var e = Assert.Throws<ConfigException>(() => SentinelDoctor.RunAsync(_topo.Url, null, how), c.ToString());
            StringAssert.StartsWith(c.Watch != "-" ? "watch must be" : "pings must be", e.Message, c.ToString());
        }
    }
}
