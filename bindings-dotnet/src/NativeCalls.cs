// P/Invoke declarations of the C ABI's command calls: per-call options and cancel handles,
// commands, pipelines and transactions (ffi-c/src/client.rs, operation.rs, transaction.rs).
using System;
using System.Runtime.InteropServices;

namespace SentinelRecovery
{
    internal static unsafe partial class Native
    {
        [StructLayout(LayoutKind.Sequential)]
        internal struct sr_call_options_t
        {
            public ulong timeout_ms;
            public IntPtr* operation;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct sr_command_t
        {
            public UIntPtr argc;
            public IntPtr* argv;
            public UIntPtr* argv_len;
        }

        /// <summary><c>sr_reply_cb</c> and <c>sr_results_cb</c> (one shape): runs on a core thread,
        /// once per accepted call; never throws.</summary>
        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate void OutcomeCallback(IntPtr userData, IntPtr outcome, IntPtr error);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_client_execute_with(ClientHandle client, UIntPtr argc, IntPtr* argv,
            UIntPtr* argvLen, sr_call_options_t* options, IntPtr callback, IntPtr userData);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_client_pipeline(ClientHandle client, sr_command_t* commands, UIntPtr n,
            sr_call_options_t* options, IntPtr callback, IntPtr userData);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_client_transaction(ClientHandle client, sr_command_t* commands, UIntPtr n,
            UIntPtr watchN, IntPtr* watch, UIntPtr* watchLen, sr_call_options_t* options, IntPtr callback, IntPtr userData);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void sr_operation_cancel(IntPtr operation);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void sr_operation_free(IntPtr operation);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern UIntPtr sr_results_len(IntPtr results);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr sr_results_reply(IntPtr results, UIntPtr index);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr sr_results_error(IntPtr results, UIntPtr index);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_client_transaction_begin_into(ClientHandle client, sr_call_options_t* options,
            IntPtr mailbox, ulong opId);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_transaction_watch_into(IntPtr transaction, UIntPtr n, IntPtr* keys, UIntPtr* keysLen,
            IntPtr mailbox, ulong opId);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_transaction_execute_into(IntPtr transaction, UIntPtr argc, IntPtr* argv,
            UIntPtr* argvLen, IntPtr mailbox, ulong opId);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_transaction_exec_into(IntPtr transaction, sr_command_t* commands, UIntPtr n,
            IntPtr mailbox, ulong opId);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void sr_transaction_free(IntPtr transaction);
    }
}
