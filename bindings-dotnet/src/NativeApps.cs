// P/Invoke declarations of the C ABI's per-call options, pipelines and transactions, all in their
// host-mailbox (*_into) forms (ffi-c/src/client.rs, operation.rs, transaction.rs). C# 7.2 (Mono mcs).
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

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_client_execute_into(ClientHandle client, UIntPtr argc, IntPtr* argv,
            UIntPtr* argvLen, sr_call_options_t* options, IntPtr mailbox, ulong opId);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sr_client_pipeline_into(ClientHandle client, sr_command_t* commands, UIntPtr n,
            sr_call_options_t* options, IntPtr mailbox, ulong opId);

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
        internal static extern int sr_client_transaction_into(ClientHandle client, sr_command_t* commands, UIntPtr n,
            UIntPtr watchN, IntPtr* watch, UIntPtr* watchLen, sr_call_options_t* options, IntPtr mailbox, ulong opId);

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
