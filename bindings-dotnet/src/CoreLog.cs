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
        private static readonly Native.LogCallback CoreLogCallback = OnCoreLog;
        private static readonly IntPtr CoreLogPtr = Marshal.GetFunctionPointerForDelegate(CoreLogCallback);
        private static readonly object CoreLogGate = new object();
        private static TraceLevel _coreLogLevel = TraceLevel.Off;

        /// <summary>
        /// The least severe core log record forwarded to <see cref="Log"/> (or, without a hook, to
        /// <see cref="Trace"/>): <see cref="TraceLevel.Warning"/> forwards warnings and errors,
        /// <see cref="TraceLevel.Verbose"/> everything, <see cref="TraceLevel.Off"/> (the default)
        /// nothing. Process-wide. Records are the core's (levels and targets as in every binding:
        /// trace/debug are Verbose, info is Info, warn is Warning, error is Error), written as
        /// <c>"[target] message"</c>, never with a password, and delivered in order on the
        /// <c>sr-dotnet-log</c> background thread (never on a core thread).
        /// </summary>
        public static TraceLevel CoreLogLevel
        {
            get { lock (CoreLogGate) return _coreLogLevel; }
            set
            {
                lock (CoreLogGate)
                {
                    int rc = value == TraceLevel.Off
                        ? Native.sr_set_log_callback(IntPtr.Zero, IntPtr.Zero, 0)
                        : Native.sr_set_log_callback(CoreLogPtr, IntPtr.Zero, CoreLevel(value));
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

        private static void OnCoreLog(IntPtr userData, int level, IntPtr target, IntPtr message)
        {
            try
            {
                LogDispatcher.Enqueue(FromCore(level), "[" + Native.Utf8(target) + "] " + Native.Utf8(message));
            }
            catch
            {
                // Nothing may unwind into native code.
            }
        }

        /// <summary>Hands core log records to <see cref="Report"/> on one background thread, in order.</summary>
        private static class LogDispatcher
        {
            private const int MaxPending = 10000;
            private static readonly Queue<KeyValuePair<TraceLevel, string>> Pending = new Queue<KeyValuePair<TraceLevel, string>>();
            private static Thread _thread;

            internal static void Enqueue(TraceLevel level, string message)
            {
                lock (Pending)
                {
                    if (Pending.Count >= MaxPending) return; // a stalled hook must not grow memory
                    Pending.Enqueue(new KeyValuePair<TraceLevel, string>(level, message));
                    if (_thread == null)
                    {
                        _thread = new Thread(Run) { IsBackground = true, Name = "sr-dotnet-log" };
                        _thread.Start();
                    }
                    Monitor.Pulse(Pending);
                }
            }

            private static void Run()
            {
                for (;;)
                {
                    KeyValuePair<TraceLevel, string> item;
                    lock (Pending)
                    {
                        while (Pending.Count == 0) Monitor.Wait(Pending);
                        item = Pending.Dequeue();
                    }
                    Report(item.Key, item.Value);
                }
            }
        }
    }
}
