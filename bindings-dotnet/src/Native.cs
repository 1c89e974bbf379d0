// P/Invoke declarations for ffi-c/include/sentinel_recovery.h. C# 7.2 (Mono mcs): classic
// delegates for callbacks, no function pointers, no NativeLibrary, no LibraryImport.
using System;
using System.Runtime.InteropServices;
using System.Text;

namespace SentinelRecovery
{
    /// <summary>The layouts and entry points of the C ABI. Internal: the public API never exposes a pointer.</summary>
    internal static unsafe partial class Native
    {
        /// <summary>The library name: <c>libsentinel_recovery.so</c> on Linux (beside the assembly,
        /// found through a Mono <c>dllmap</c>, or from <c>runtimes/linux-x64/native</c> on .NET).</summary>
        internal const string Lib = "sentinel_recovery";

        internal const int SR_OK = 0;

        internal const int SR_REPLY_NIL = 0, SR_REPLY_INTEGER = 1, SR_REPLY_DOUBLE = 2, SR_REPLY_BOOLEAN = 3,
            SR_REPLY_BIG_NUMBER = 4, SR_REPLY_BULK = 5, SR_REPLY_SIMPLE = 6, SR_REPLY_VERBATIM = 7,
            SR_REPLY_ARRAY = 8, SR_REPLY_MAP = 9, SR_REPLY_SET = 10, SR_REPLY_PUSH = 11, SR_REPLY_ERROR = 12;

        [StructLayout(LayoutKind.Sequential)]
        internal struct sr_option_t
        {
            public IntPtr key;
            public IntPtr value;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct sr_address_t
        {
            public IntPtr host;
            public ushort port;
            public sr_address_t* announced; // NULL unless address_map mapped it
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct sr_sentinel_t
        {
            public IntPtr host;
            public ushort port;
            public byte up; // C bool
            public byte tilt; // C bool
            public byte knows_service; // C bool
            public sr_address_t* announced; // NULL unless address_map mapped it
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct sr_topology_t
        {
            public IntPtr service;
            public sr_address_t* primary;
            public sr_address_t* replicas;
            public UIntPtr replicas_len;
            public sr_sentinel_t* sentinels;
            public UIntPtr sentinels_len;
            public ulong epoch;
            public byte healthy;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct sr_event_t
        {
            public int kind;
            public IntPtr kind_name;
            public IntPtr service;
            public ulong at;
            public sr_address_t* old_primary;
            public sr_address_t* address;
            public sr_address_t* replicas;
            public UIntPtr replicas_len;
            public sr_sentinel_t* sentinels;
            public UIntPtr sentinels_len;
            public IntPtr error;
            public IntPtr json;
            public byte on; // C bool
            public ulong gap_ms;
        }

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr sr_version();

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_client_open(byte* url, sr_option_t* options, UIntPtr optionsLen,
            out ClientHandle client, out IntPtr error);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_client_wait_ready(ClientHandle client, out IntPtr topology, out IntPtr error);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_client_panic_for_test_into(ClientHandle client, IntPtr mailbox, ulong opId);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_client_execute_blocking(ClientHandle client, UIntPtr argc, IntPtr* argv,
            UIntPtr* argvLen, out IntPtr reply, out IntPtr error);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_client_topology(ClientHandle client, out IntPtr topology, out IntPtr error);

        /// <summary><c>sr_wake_cb</c>: runs on the thread that filled the mailbox (a core thread); must
        /// only signal, never block or throw. With <see cref="OutcomeCallback"/> (a copy and a
        /// TrySet*) and an <c>address_map</c> function (synchronous by design), the only managed code
        /// a core thread runs.</summary>
        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate void WakeCallback(IntPtr userData);

        /// <summary><c>sr_delivery_cb</c>: runs on the draining thread (<c>sr-dotnet-host</c>); never throws.</summary>
        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate void DeliveryCallback(IntPtr userData, IntPtr delivery);

        internal const int SR_DELIVERY_COMPLETION = 1, SR_DELIVERY_EVENT = 2, SR_DELIVERY_LOG = 4, SR_DELIVERY_DROPPED = 5;

        /// <summary><c>sr_delivery_t</c>: borrowed for the delivery callback only.</summary>
        [StructLayout(LayoutKind.Sequential)]
        internal struct sr_delivery_t
        {
            public int kind;
            public ulong op_id;
            public IntPtr reply;
            public IntPtr results;
            public IntPtr topology;
            public IntPtr error;
            public IntPtr evt;
            public ulong dropped;
            public int level;
            public IntPtr target;
            public IntPtr message;
            public IntPtr subscription; // owned by the receiver
            public IntPtr pubsub_message;
            public IntPtr transaction; // owned by the receiver
            public IntPtr json;
            public int exit_code;
        }

        /// <summary>The delivery behind a pointer handed to a completion.</summary>
        internal static sr_delivery_t Delivery(IntPtr delivery) { return *(sr_delivery_t*)delivery; }

        /// <summary>Frees the handles a completion hands over that nobody took (its task was
        /// cancelled or is gone), so none leaks.</summary>
        internal static void ReleaseHandedOver(IntPtr delivery)
        {
            var d = (sr_delivery_t*)delivery;
            if (d->subscription != IntPtr.Zero) NativePubSub.sr_subscription_free(d->subscription);
            if (d->transaction != IntPtr.Zero) sr_transaction_free(d->transaction);
        }

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_mailbox_new(UIntPtr bound, IntPtr wake, IntPtr wakeUserData, out IntPtr mailbox);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_mailbox_drain(IntPtr mailbox, IntPtr deliver, IntPtr userData, out UIntPtr delivered);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_mailbox_close(IntPtr mailbox, IntPtr deliver, IntPtr userData);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void sr_mailbox_free(IntPtr mailbox);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_client_set_event_mailbox(ClientHandle client, IntPtr mailbox);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_set_log_mailbox(IntPtr mailbox, int minLevel);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_client_wait_ready_into(ClientHandle client, sr_call_options_t* options,
            IntPtr mailbox, ulong opId);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_client_close(IntPtr client);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void sr_client_free(IntPtr client);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_error_get_code(IntPtr error);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr sr_error_get_message(IntPtr error);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr sr_error_get_server_code(IntPtr error);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void sr_error_free(IntPtr error);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_call_timeout_ms(double ms, out ulong timeoutMs, out IntPtr error);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern unsafe int sr_argument_float_text(double value, [MarshalAs(UnmanagedType.I1)] bool single,
            UIntPtr index, byte* buf, UIntPtr cap, out UIntPtr len, out IntPtr error);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr sr_error_message(int code);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr sr_error_code_name(int code);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_reply_type(IntPtr reply);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_reply_integer(IntPtr reply, out long value);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_reply_double(IntPtr reply, out double value);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_reply_boolean(IntPtr reply, out byte value);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_reply_bytes(IntPtr reply, out byte* data, out UIntPtr len);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_reply_verbatim_format(IntPtr reply, out byte* data, out UIntPtr len);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_reply_len(IntPtr reply, out UIntPtr len);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_reply_element(IntPtr reply, UIntPtr index, out IntPtr element);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_reply_map_entry(IntPtr reply, UIntPtr index, out IntPtr key, out IntPtr value);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void sr_reply_free(IntPtr reply);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_runtime_set_worker_threads(UIntPtr threads, out IntPtr error);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_runtime_shutdown(ulong timeoutMs);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void sr_topology_free(IntPtr topology);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr sr_event_clone(IntPtr evt);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void sr_event_free(IntPtr evt);

        /// <summary>A NUL-terminated UTF-8 string (borrowed) as a managed string; null for NULL.</summary>
        internal static string Utf8(IntPtr p)
        {
            if (p == IntPtr.Zero) return null;
            byte* b = (byte*)p;
            int n = 0;
            while (b[n] != 0) n++;
            return Encoding.UTF8.GetString(b, n);
        }

        /// <summary><paramref name="s"/> as NUL-terminated UTF-8.</summary>
        internal static byte[] ToUtf8Z(string s)
        {
            int n = Encoding.UTF8.GetByteCount(s);
            byte[] b = new byte[n + 1];
            Encoding.UTF8.GetBytes(s, 0, s.Length, b, 0);
            return b;
        }
    }

    /// <summary>The native client. <see cref="ReleaseHandle"/> closes (blocking until every
    /// completion of the client has been delivered) and frees it. It runs on a host thread (the
    /// caller of Dispose, or the finalizer thread), never on a core thread: the library only ever
    /// calls into managed code through the mailbox's wake-up, the outcome callback and an address
    /// map, which never dispose anything.</summary>
    internal sealed class ClientHandle : SafeHandle
    {
        /// <summary>The mailbox the client's events go to; closed and freed after the client is
        /// closed (null until set).</summary>
        internal HostMailbox Mailbox;

        /// <summary>The address_map function the library calls, kept reachable until the client is
        /// closed (null without one).</summary>
        internal AddressMapper AddressMap;

        private ClientHandle() : base(IntPtr.Zero, true) { }

        public override bool IsInvalid { get { return handle == IntPtr.Zero; } }

        /// <summary>Closes the client (idempotent in the C ABI: a second close gives SR_ERR_CLOSED).
        /// Takes a reference so a concurrent ReleaseHandle can't free the pointer under us.</summary>
        internal void Close_()
        {
            bool added = false;
            try
            {
                DangerousAddRef(ref added);
                Native.sr_client_close(handle);
            }
            catch (ObjectDisposedException) { }
            finally
            {
                if (added) DangerousRelease();
            }
        }

        protected override bool ReleaseHandle()
        {
            Native.sr_client_close(handle);
            Native.sr_client_free(handle);
            var mailbox = System.Threading.Interlocked.Exchange(ref Mailbox, null);
            if (mailbox != null) mailbox.Free();
            return true;
        }
    }
}
