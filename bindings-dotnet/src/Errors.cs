using System;

namespace SentinelRecovery
{
    // ErrorCode and CodeNames are generated from the core's table: Tables.g.cs.

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
            switch (code)
            {
                case ErrorCode.Config: return new ConfigException(message);
                case ErrorCode.SentinelsUnreachable: return new SentinelsUnreachableException(message);
                case ErrorCode.ServiceUnknown: return new ServiceUnknownException(message);
                case ErrorCode.NoHealthyPrimary: return new NoHealthyPrimaryException(message);
                case ErrorCode.Timeout: return new SentinelTimeoutException(message);
                case ErrorCode.ConnectionLost: return new ConnectionLostException(message);
                case ErrorCode.Server: return new ServerException(message, serverCode);
                case ErrorCode.Protocol: return new ProtocolException(message);
                case ErrorCode.Tls: return new TlsException(message);
                case ErrorCode.Auth: return new AuthException(message, serverCode);
                case ErrorCode.Closed: return new ClientClosedException(message);
                case ErrorCode.QueueFull: return new QueueFullException(message);
                case ErrorCode.Internal: return new InternalException(message);
                case ErrorCode.NotReplicated: return new NotReplicatedException(message);
                default: return new SentinelRecoveryException(code, message);
            }
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

    /// <summary><see cref="ErrorCode.Config"/>: the URL or an option is invalid.</summary>
    public class ConfigException : SentinelRecoveryException
    {
        /// <summary>Creates the error.</summary>
        public ConfigException(string message) : base(ErrorCode.Config, message) { }
    }

    /// <summary><see cref="ErrorCode.SentinelsUnreachable"/>: no sentinel could be reached.</summary>
    public class SentinelsUnreachableException : SentinelRecoveryException
    {
        /// <summary>Creates the error.</summary>
        public SentinelsUnreachableException(string message) : base(ErrorCode.SentinelsUnreachable, message) { }
    }

    /// <summary><see cref="ErrorCode.ServiceUnknown"/>: no sentinel monitors the service.</summary>
    public class ServiceUnknownException : SentinelRecoveryException
    {
        /// <summary>Creates the error.</summary>
        public ServiceUnknownException(string message) : base(ErrorCode.ServiceUnknown, message) { }
    }

    /// <summary><see cref="ErrorCode.NoHealthyPrimary"/>: no primary that is up and verified.</summary>
    public class NoHealthyPrimaryException : SentinelRecoveryException
    {
        /// <summary>Creates the error.</summary>
        public NoHealthyPrimaryException(string message) : base(ErrorCode.NoHealthyPrimary, message) { }
    }

    /// <summary><see cref="ErrorCode.Timeout"/>: an operation missed its deadline (named so
    /// it does not clash with <see cref="System.TimeoutException"/>).</summary>
    public class SentinelTimeoutException : SentinelRecoveryException
    {
        /// <summary>Creates the error.</summary>
        public SentinelTimeoutException(string message) : base(ErrorCode.Timeout, message) { }
    }

    /// <summary><see cref="ErrorCode.ConnectionLost"/>: the connection broke with the command in
    /// flight; it may or may not have run.</summary>
    public class ConnectionLostException : SentinelRecoveryException
    {
        /// <summary>Creates the error.</summary>
        public ConnectionLostException(string message) : base(ErrorCode.ConnectionLost, message) { }
    }

    /// <summary><see cref="ErrorCode.Server"/>: the server answered with an error reply.</summary>
    public class ServerException : SentinelRecoveryException
    {
        /// <summary>The first word of the server's error (<c>"ERR"</c>, <c>"WRONGTYPE"</c>, ...), or null.</summary>
        public string ServerCode { get; private set; }

        /// <summary>Creates the error.</summary>
        public ServerException(string message, string serverCode) : base(ErrorCode.Server, message) { ServerCode = serverCode; }
    }

    /// <summary><see cref="ErrorCode.Protocol"/>: invalid or unexpected RESP.</summary>
    public class ProtocolException : SentinelRecoveryException
    {
        /// <summary>Creates the error.</summary>
        public ProtocolException(string message) : base(ErrorCode.Protocol, message) { }
    }

    /// <summary><see cref="ErrorCode.Tls"/>: TLS setup or handshake failed.</summary>
    public class TlsException : SentinelRecoveryException
    {
        /// <summary>Creates the error.</summary>
        public TlsException(string message) : base(ErrorCode.Tls, message) { }
    }

    /// <summary><see cref="ErrorCode.Auth"/>: the server refused the credentials.</summary>
    public class AuthException : SentinelRecoveryException
    {
        /// <summary>The server's error word when the server reported it, or null.</summary>
        public string ServerCode { get; private set; }

        /// <summary>Creates the error.</summary>
        public AuthException(string message, string serverCode = null) : base(ErrorCode.Auth, message) { ServerCode = serverCode; }
    }

    /// <summary><see cref="ErrorCode.Closed"/>: the client was disposed (before or while the
    /// command ran).</summary>
    public class ClientClosedException : SentinelRecoveryException
    {
        /// <summary>Creates the error.</summary>
        public ClientClosedException(string message) : base(ErrorCode.Closed, message) { }
    }

    /// <summary><see cref="ErrorCode.QueueFull"/>: too many commands are waiting for a primary.</summary>
    public class QueueFullException : SentinelRecoveryException
    {
        /// <summary>Creates the error.</summary>
        public QueueFullException(string message) : base(ErrorCode.QueueFull, message) { }
    }

    /// <summary><c>internal</c>: a bug in the library (a caught panic); the operation failed, the
    /// process goes on.</summary>
    public sealed class InternalException : SentinelRecoveryException
    {
        /// <summary>Creates the error.</summary>
        public InternalException(string message) : base(ErrorCode.Internal, message) { }
    }

    /// <summary><see cref="ErrorCode.NotReplicated"/> (option <c>wait_replicas</c>): the write ran
    /// on the primary, but fewer replicas than asked confirmed it within <c>wait_timeout_ms</c>,
    /// so a failover may lose it. Never retried: it has run.</summary>
    public class NotReplicatedException : SentinelRecoveryException
    {
        /// <summary>Creates the error.</summary>
        public NotReplicatedException(string message) : base(ErrorCode.NotReplicated, message) { }
    }
}
