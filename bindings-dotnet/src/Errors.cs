using System;

namespace SentinelRecovery
{
    // ErrorCode and CodeNames are generated from the core's table: Tables.g.cs; so are the class
    // of each code and ErrorClasses.Create: Errors.g.cs.

    /// <summary>Base of every error of the library. <see cref="Code"/> is stable across versions
    /// and languages; messages never contain passwords.</summary>
    public class SentinelRecoveryException : Exception
    {
        /// <summary>The stable error code.</summary>
        public ErrorCode Code { get; private set; }

        /// <summary>The code's snake_case name shared by all bindings (<c>"no_healthy_primary"</c>, ...).</summary>
        public string CodeName { get { return CodeNames.Of(Code); } }

        /// <summary>Creates an error with a code and a message.</summary>
        public SentinelRecoveryException(ErrorCode code, string message) : base(message) { Code = code; }

        /// <summary>Creates an error the right subclass for <paramref name="code"/>.</summary>
        public static SentinelRecoveryException Create(ErrorCode code, string message, string serverCode = null)
        {
            return ErrorClasses.Create(code, message, serverCode);
        }

        /// <summary>Copies a native error (borrowed or owned; not freed here).</summary>
        internal static SentinelRecoveryException FromNative(IntPtr error)
        {
            int code = Native.sr_error_get_code(error);
            string msg = Native.Utf8(Native.sr_error_get_message(error)) ?? Native.Utf8(Native.sr_error_message(code));
            if (code == (int)ErrorCode.Config) msg = DotNetHints(msg);
            return Create((ErrorCode)code, msg, Native.Utf8(Native.sr_error_get_server_code(error)));
        }

        /// <summary>The C ABI's hints (MULTI refused on the shared connection, ...) in this API's words:
        /// the C names are ffi-c's <c>C_API</c> (HintsNameTheDotNetApi fails when they drift).</summary>
        private static string DotNetHints(string message)
        {
            return message
                .Replace("sr_client_transaction() with its watch keys", "TransactionAsync(commands, watch)")
                .Replace("sr_client_transaction()", "TransactionAsync(commands)");
        }

        /// <summary>Copies and frees an owned native error; a generic one when the library gave none.</summary>
        internal static SentinelRecoveryException TakeNative(int rc, IntPtr error)
        {
            if (error == IntPtr.Zero) return Create((ErrorCode)rc, Native.Utf8(Native.sr_error_message(rc)));
            try { return FromNative(error); }
            finally { Native.sr_error_free(error); }
        }
    }
}
