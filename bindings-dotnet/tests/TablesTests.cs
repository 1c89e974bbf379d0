// The wrapper's generated tables against the native library's, at run time.
using System;
using NUnit.Framework;

namespace SentinelRecovery.Tests
{
    [TestFixture]
    public class TablesTests
    {
        [Test]
        public void EveryErrorCodeHasTheNativeLibrarysNameAndItsOwnExceptionClass()
        {
            foreach (ErrorCode code in Enum.GetValues(typeof(ErrorCode)))
            {
                var e = SentinelRecoveryException.Create(code, "m");
                Assert.That(e.CodeName, Is.EqualTo(SentinelClient.NativeErrorCodeName(code)), code.ToString());
                Assert.That(e.CodeName, Is.Not.EqualTo("unknown"), code.ToString());
                Assert.That(e.Code, Is.EqualTo(code));
            }
            Assert.That(SentinelRecoveryException.Create(ErrorCode.Internal, "m"), Is.InstanceOf<InternalException>());
            Assert.That((int)ErrorCode.Internal, Is.EqualTo(13));
        }

        [Test]
        public void EventKindsIncludeThoseOfTheFailoverIssue()
        {
            Assert.That((int)EventKind.FailoverStarted, Is.EqualTo(9));
            Assert.That((int)EventKind.SentinelTilt, Is.EqualTo(10));
            Assert.That((int)EventKind.SentinelServiceUnknown, Is.EqualTo(11));
        }
    }
}
