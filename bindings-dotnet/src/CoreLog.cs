using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Runtime.InteropServices;
using System.Threading;
using System.Threading.Tasks;

namespace SentinelRecovery
{
    public sealed partial class SentinelClient
    {
        private static readonly object CoreLogGate = new object();
        /// <summary>Where core log records queue for the host thread (made on first use, kept for
        /// the process); at most 4096 wait, beyond that they are dropped and the count reported.</summary>
        private static HostMailbox _logMailbox;
        private static TraceLevel _coreLogLevel = TraceLevel.Off;

        /// <summary>
        /// The least severe core log record forwarded to <see cref="Log"/> (or, without a hook, to
        /// <see cref="Trace"/>): <see cref="TraceLevel.Warning"/> forwards warnings and errors,
        /// <see cref="TraceLevel.Verbose"/> everything, <see cref="TraceLevel.Off"/> (the default)
        /// nothing. Process-wide. Records are the core's (levels and targets as in every binding:
        /// trace/debug are Verbose, info is Info, warn is Warning, error is Error), written as
        /// <c>"[target] message"</c>, never with a password, and delivered in order on the
        /// <c>sr-dotnet-host</c> background thread (never on a core thread); at most 4096 wait for
        /// it, beyond that they are dropped and the count reported as a warning.
        /// </summary>
        public static TraceLevel CoreLogLevel
        {
            get { lock (CoreLogGate) return _coreLogLevel; }
            set
            {
                lock (CoreLogGate)
                {
                    if (value != TraceLevel.Off && _logMailbox == null) _logMailbox = HostMailbox.Create(null, 4096);
                    int rc = value == TraceLevel.Off
                        ? Native.sr_set_log_mailbox(IntPtr.Zero, 0)
                        : Native.sr_set_log_mailbox(_logMailbox.Pointer, CoreLevel(value));
                    if (rc != Native.SR_OK)
                        throw SentinelRecoveryException.Create((ErrorCode)rc,
                            "the process already forwards Rust log records elsewhere");
                    _coreLogLevel = value;
                }
            }
        }

        private static int CoreLevel(TraceLevel level)
        {
            switch (level)
            {
                case TraceLevel.Error: return 40;
                case TraceLevel.Warning: return 30;
                case TraceLevel.Info: return 20;
                default: return 5;
            }
        }

        private static TraceLevel FromCore(int level)
        {
            if (level >= 40) return TraceLevel.Error;
            if (level >= 30) return TraceLevel.Warning;
            if (level >= 20) return TraceLevel.Info;
            return TraceLevel.Verbose;
        }

        /// <summary>On the host thread: one core log record, to <see cref="Report"/>.</summary>
        internal static void DeliverLog(int level, IntPtr target, IntPtr message)
        {
            Report(FromCore(level), "[" + Native.Utf8(target) + "] " + Native.Utf8(message));
        }
    }
}
