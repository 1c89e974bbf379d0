// The doctor over sr_doctor_into: the diagnosis of `sentinel-recovery doctor` as a Task, completed
// through a host mailbox on the sr-dotnet-host thread.
using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;
using System.Threading;
using System.Threading.Tasks;

namespace SentinelRecovery
{
    internal static unsafe partial class Native
    {
        [StructLayout(LayoutKind.Sequential)]
        internal struct sr_doctor_options_t
        {
            public double watch_ms;
            public int pings;
            public IntPtr address_map;
            public IntPtr address_map_user_data;
        }

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_doctor_into(byte* url, sr_option_t* options, UIntPtr optionsLen,
            sr_doctor_options_t* doctorOptions, IntPtr* operation, IntPtr mailbox, ulong opId, out IntPtr error);
    }

    /// <summary>The verdict of a diagnosis; the values are the CLI's exit codes.</summary>
    public enum DoctorStatus
    {
        /// <summary>Nothing found (exit code 0).</summary>
        Healthy = 0,
        /// <summary>Risks: the deployment works now but may not fail over as expected (exit code 1).</summary>
        Warning = 1,
        /// <summary>Something that breaks failover or discovery now (exit code 2).</summary>
        Failure = 2,
    }

    /// <summary>A finished diagnosis.</summary>
    public sealed class DoctorReport
    {
        internal DoctorReport(string json, int exitCode)
        {
            Json = json;
            ExitCode = exitCode;
        }

        /// <summary>The report as JSON (schema 1, what <c>sentinel-recovery doctor --json</c> prints):
        /// <c>verdict</c>, <c>findings</c> (each with <c>severity</c>, <c>mode</c>, <c>code</c>,
        /// <c>subject</c>, <c>message</c>, <c>hint</c>), <c>sentinels</c>, <c>agreement</c>,
        /// <c>quorum</c>, <c>names</c>, <c>data_nodes</c>, <c>timing</c>. Never holds a password.</summary>
        public string Json { get; private set; }

        /// <summary>0 healthy, 1 warnings, 2 failures.</summary>
        public int ExitCode { get; private set; }

        /// <summary>The verdict.</summary>
        public DoctorStatus Status { get { return (DoctorStatus)ExitCode; } }
    }

    /// <summary>How <see cref="SentinelDoctor.RunAsync"/> diagnoses.</summary>
    public sealed class DoctorOptions
    {
        /// <summary>Sample a PING every 100 ms to each sentinel for this long (at most an hour), to
        /// see loop stalls from outside; null (or zero) for none. Out of range,
        /// <see cref="SentinelDoctor.RunAsync"/> throws <see cref="ConfigException"/>.</summary>
        public TimeSpan? Watch { get; set; }

        /// <summary>PINGs per sentinel for the round-trip figures, 1 to 1000; 0 for the default (10).
        /// Out of range, <see cref="SentinelDoctor.RunAsync"/> throws <see cref="ConfigException"/>.</summary>
        public int Pings { get; set; }

        /// <summary>The function form of <c>address_map</c>, as for
        /// <see cref="SentinelClient.Open(string, IDictionary{string, string}, Func{NodeAddress, NodeAddress})"/>.</summary>
        public Func<NodeAddress, NodeAddress> AddressMap { get; set; }
    }

    /// <summary>
    /// The diagnosis of <c>sentinel-recovery doctor</c>: tells a stalled sentinel (TILT) from slow
    /// or misdirected name resolution, a quorum or majority out of reach, sentinels that disagree,
    /// a replica that can't be promoted, with the numbers that prove it. Runs on the library's own
    /// threads with a client's options; the report reaches the <c>sr-dotnet-host</c> thread through
    /// a mailbox of the process's own and completes the task through a
    /// <see cref="TaskCompletionSource{T}"/> with <see cref="TaskCreationOptions.RunContinuationsAsynchronously"/>.
    /// </summary>
    public static class SentinelDoctor
    {
        private static readonly object Gate = new object();
        /// <summary>Where diagnoses complete (made on first use, kept for the process).</summary>
        private static HostMailbox _mailbox;

        private static HostMailbox Mailbox
        {
            get
            {
                lock (Gate) return _mailbox ?? (_mailbox = HostMailbox.Create(null, 1));
            }
        }

        /// <summary>Diagnoses the deployment of <paramref name="url"/>.</summary>
        /// <param name="url">A <c>redis+sentinel://</c> URL, as for <see cref="SentinelClient.Open(string, IDictionary{string, string})"/>.</param>
        /// <param name="options">A client's options overriding the URL's query keys, or null.</param>
        /// <param name="doctorOptions">How to diagnose, or null for the defaults.</param>
        /// <param name="cancellationToken">Stops the diagnosis (a long <see cref="DoctorOptions.Watch"/>
        /// above all): the task is then cancelled.</param>
        /// <returns>The report. The task fails only when no diagnosis is possible (a
        /// <see cref="ConfigException"/> is thrown synchronously for a bad URL or option); every
        /// problem of the deployment is in the report.</returns>
        public static unsafe Task<DoctorReport> RunAsync(string url, IDictionary<string, string> options = null,
            DoctorOptions doctorOptions = null, CancellationToken cancellationToken = default(CancellationToken))
        {
            if (cancellationToken.IsCancellationRequested) return SentinelClient.Canceled<DoctorReport>();
            var packed = NativeOptions.Pack(url, options);
            var mapper = doctorOptions == null ? null : AddressMapper.For(doctorOptions.AddressMap);
            var how = new Native.sr_doctor_options_t();
            if (doctorOptions != null)
            {
                // The rule is the core's: out of range, sr_doctor_into refuses (ConfigException).
                // Through C's options struct, 0 means "not set".
                if (doctorOptions.Watch.HasValue) how.watch_ms = doctorOptions.Watch.Value.TotalMilliseconds;
                how.pings = doctorOptions.Pings;
            }
            if (mapper != null) how.address_map = mapper.Pointer;
            // The op stays in the mailbox's table until the report comes, and with it the mapper
            // whose thunk the library calls until then.
            var op = new PendingOp<DoctorReport>(d =>
            {
                GC.KeepAlive(mapper);
                var report = Native.Delivery(d);
                return new DoctorReport(Native.Utf8(report.json), report.exit_code);
            });
            var mailbox = Mailbox;
            ulong id = mailbox.Register(op);
            int nopt = packed.Count;
            var opts = new Native.sr_option_t[Math.Max(nopt, 1)];
            IntPtr err;
            IntPtr native = IntPtr.Zero;
            int rc;
            fixed (byte* b = packed.Buffer)
            fixed (Native.sr_option_t* o = opts)
            {
                packed.Fill(b, o);
                rc = Native.sr_doctor_into(b, nopt == 0 ? null : o, (UIntPtr)(uint)nopt, &how, &native, mailbox.Pointer, id, out err);
            }
            packed.Clear();
            if (rc != Native.SR_OK)
            {
                // Not started: no completion will come, so the entry is ours to remove.
                mailbox.Unregister(id);
                throw SentinelRecoveryException.TakeNative(rc, err);
            }
            return op.Started(cancellationToken, native);
        }
    }
}
