// The doctor over sr_doctor: the diagnosis of `sentinel-recovery doctor` as a Task.
using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;
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

        /// <summary><c>sr_doctor_cb</c>: runs once on a core thread; must copy and return, never throw.</summary>
        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate void DoctorCallback(IntPtr userData, IntPtr json, int exitCode, IntPtr error);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_doctor(byte* url, sr_option_t* options, UIntPtr optionsLen,
            sr_doctor_options_t* doctorOptions, IntPtr callback, IntPtr userData, out IntPtr error);
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
    /// threads with a client's options; the task completes through a
    /// <see cref="TaskCompletionSource{T}"/> with <see cref="TaskCreationOptions.RunContinuationsAsynchronously"/>.
    /// </summary>
    public static class SentinelDoctor
    {
        // Kept alive for the whole process: native code holds a pointer to this thunk.
        private static readonly Native.DoctorCallback Callback = OnDone;
        private static readonly IntPtr CallbackPtr = Marshal.GetFunctionPointerForDelegate(Callback);

        private sealed class Pending
        {
            internal readonly TaskCompletionSource<DoctorReport> Tcs =
                new TaskCompletionSource<DoctorReport>(TaskCreationOptions.RunContinuationsAsynchronously);
            // Reachable from the GCHandle until the diagnosis completes: its thunk is called until then.
            internal AddressMapper Mapper;
        }

        /// <summary>Diagnoses the deployment of <paramref name="url"/>.</summary>
        /// <param name="url">A <c>redis+sentinel://</c> URL, as for <see cref="SentinelClient.Open(string, IDictionary{string, string})"/>.</param>
        /// <param name="options">A client's options overriding the URL's query keys, or null.</param>
        /// <param name="doctorOptions">How to diagnose, or null for the defaults.</param>
        /// <returns>The report. The task fails only when no diagnosis is possible (a
        /// <see cref="ConfigException"/> is thrown synchronously for a bad URL or option); every
        /// problem of the deployment is in the report.</returns>
        public static unsafe Task<DoctorReport> RunAsync(string url, IDictionary<string, string> options = null,
            DoctorOptions doctorOptions = null)
        {
            var packed = NativeOptions.Pack(url, options);
            var pending = new Pending { Mapper = doctorOptions == null ? null : AddressMapper.For(doctorOptions.AddressMap) };
            var how = new Native.sr_doctor_options_t();
            if (doctorOptions != null)
            {
                // The rule is the core's: out of range, sr_doctor refuses (ConfigException). Through
                // C's options struct, 0 means "not set".
                if (doctorOptions.Watch.HasValue) how.watch_ms = doctorOptions.Watch.Value.TotalMilliseconds;
                how.pings = doctorOptions.Pings;
            }
            if (pending.Mapper != null) how.address_map = pending.Mapper.Pointer;
            var gch = GCHandle.Alloc(pending);
            int nopt = packed.Count;
            var opts = new Native.sr_option_t[Math.Max(nopt, 1)];
            IntPtr err;
            int rc;
            fixed (byte* b = packed.Buffer)
            fixed (Native.sr_option_t* o = opts)
            {
                packed.Fill(b, o);
                rc = Native.sr_doctor(b, nopt == 0 ? null : o, (UIntPtr)(uint)nopt, &how, CallbackPtr,
                    GCHandle.ToIntPtr(gch), out err);
            }
            packed.Clear();
            if (rc != Native.SR_OK)
            {
                // Not started: the callback will never run, so the handle is ours to free.
                gch.Free();
                throw SentinelRecoveryException.TakeNative(rc, err);
            }
            return pending.Tcs.Task;
        }

        private static void OnDone(IntPtr userData, IntPtr json, int exitCode, IntPtr error)
        {
            try
            {
                var gch = GCHandle.FromIntPtr(userData);
                var pending = (Pending)gch.Target;
                gch.Free(); // exactly once: the library calls this once per started diagnosis
                try
                {
                    if (json != IntPtr.Zero) pending.Tcs.TrySetResult(new DoctorReport(Native.Utf8(json), exitCode));
                    else pending.Tcs.TrySetException(SentinelRecoveryException.FromNative(error));
                }
                catch (Exception e)
                {
                    pending.Tcs.TrySetException(e);
                }
            }
            catch
            {
                // Nothing may unwind into native code.
            }
        }
    }
}
