// The test suite reaches the few members kept for it (such as PanicForTestAsync) without making
// them part of the public API.
using System.Runtime.CompilerServices;

[assembly: InternalsVisibleTo("SentinelRecovery.Tests")]
